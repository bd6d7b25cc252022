"""Charts of notebook 08: per-type rates in sliding windows, the baseline, flags and the ground truth."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import matplotlib.dates as mdates
import matplotlib.pyplot as plt

from icestream.queries.anomaly import HIGH, LOW
from icestream.synthetic.ground_truth import Anomaly

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure

# One colour per kind of injected anomaly, so a spike and a burst are told apart; drops are blue
# like the LOW flags that find them, the two HIGH kinds two warm colours like the HIGH flags.
KIND_COLORS = {"spike": "tab:red", "burst": "tab:orange", "drop": "tab:blue"}


def rates_with_flags(
    scored: pd.DataFrame,
    truth: Sequence[Anomaly] = (),
    window_minutes: int = 5,
    columns: int = 3,
) -> Figure:
    """One panel per event type: rate per window, its baseline, flagged windows and the true anomalies.

    Args:
        scored: Output of ``icestream.queries.anomaly.score_windows``.
        truth: Injected anomalies, shaded in their kind's colour (:data:`KIND_COLORS`).
        window_minutes: The window length, for the axis label.
        columns: Panels per row.

    Returns:
        The figure (not shown; the notebook shows or saves it).
    """
    types = sorted(scored["event_type"].unique())
    rows = max(1, math.ceil(len(types) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.6 * rows), sharex=True, squeeze=False)
    for ax, event_type in zip(axes.flat, types, strict=False):
        series = scored[scored["event_type"] == event_type]
        # A window's rate belongs to its middle, so it lines up with the shaded true anomaly.
        middle = series["window_start"] + (series["window_end"] - series["window_start"]) / 2
        rate = series["count"] / window_minutes
        baseline = series["baseline"] / window_minutes
        ax.plot(middle, rate, color="tab:gray", linewidth=1, label="rate")
        ax.plot(middle, baseline, color="black", linewidth=1, linestyle="--", label="baseline")
        # The flag thresholds as rates: a window is flagged exactly where its rate leaves this band.
        low, high = series["band_low"] / window_minutes, series["band_high"] / window_minutes
        ax.fill_between(middle, low, high, color="black", alpha=0.08, label="no flag inside")
        for anomaly in truth:
            if anomaly.event_type == event_type:
                color = KIND_COLORS.get(anomaly.kind, "tab:purple")
                ax.axvspan(anomaly.start, anomaly.end, color=color, alpha=0.18, label=f"true {anomaly.kind}")
        for flag, marker, color in ((HIGH, "^", "tab:red"), (LOW, "v", "tab:blue")):
            hits = series["flag"] == flag
            if hits.any():
                ax.scatter(middle[hits], rate[hits], marker=marker, color=color, s=18, label=flag)
        ax.set_title(event_type, fontsize=10)
        ax.set_ylabel("events / minute")
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
        ax.tick_params(labelsize=8)
    for ax in axes.flat[len(types) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("window middle, event time (UTC)")
    handles: dict[str, Artist] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="upper left",
        bbox_to_anchor=(0.01, 0.955),
        ncol=len(handles),
        fontsize=8,
    )
    fig.suptitle(
        f"Event rates in {window_minutes}-minute sliding windows: baseline, the band a rate must leave to be "
        "flagged, flags (▲ HIGH, ▼ LOW), shaded: injected anomalies",
        fontsize=11,
        x=0.01,
        ha="left",
    )
    fig.tight_layout(rect=(0, 0, 1, 0.91))
    return fig
