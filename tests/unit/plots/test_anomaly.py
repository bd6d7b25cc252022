"""Notebook 08's chart: each kind of injected anomaly in a colour of its own, the band at the flag threshold."""

from datetime import UTC, datetime, timedelta

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba

matplotlib.use("Agg")

from icestream.plots.anomaly import KIND_COLORS, rates_with_flags
from icestream.queries.anomaly import DetectorOptions, complete_windows, score_windows
from icestream.synthetic.ground_truth import Anomaly
from icestream.synthetic.wire import format_ts

START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def anomaly(kind: str, event_type: str, minute: int) -> Anomaly:
    start = START + timedelta(minutes=minute)
    return Anomaly(
        kind, event_type, format_ts(start.timestamp()), format_ts((start + timedelta(minutes=15)).timestamp()), 4, 1
    )


def test_spike_burst_and_drop_are_shaded_in_three_colours() -> None:
    starts = pd.date_range(START, periods=120, freq="1min")
    counts = pd.DataFrame(
        {"window_start": list(starts) * 3, "event_type": ["search"] * 120 + ["error"] * 120 + ["cart"] * 120,
         "count": np.random.default_rng(1).poisson(50, 360)}
    )  # fmt: skip
    scored = score_windows(complete_windows(counts, START, START + timedelta(minutes=124), DetectorOptions()))
    truth = [anomaly("spike", "search", 60), anomaly("burst", "error", 60), anomaly("drop", "cart", 60)]
    fig = rates_with_flags(scored, truth)
    shaded = {
        text.get_text(): handle
        for handle, text in zip(fig.legends[0].legend_handles, fig.legends[0].texts, strict=True)
    }
    colours = {kind: to_rgba(shaded[f"true {kind}"].get_facecolor())[:3] for kind in ("spike", "burst", "drop")}
    assert len(set(colours.values())) == 3
    assert colours["burst"] == to_rgba(KIND_COLORS["burst"])[:3]
    assert "no flag inside" in shaded
