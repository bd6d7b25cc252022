"""Charts of an ingest run: rates, time per phase, lag behind the stream, freshness."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Wall-clock phases of a batch, in order. "parse" is left out: it runs inside the read tasks and is
# reported as task time summed over shards, so it is part of "read" here.
WALL_PHASES = ("plan", "read", "dedupe", "write_rejects", "write_events")


# One colour per phase, none shared with another (matplotlib's default cycle, fixed order).
PHASE_COLOURS = dict(zip(WALL_PHASES, ("tab:gray", "tab:blue", "tab:orange", "tab:red", "tab:green"), strict=True))


def _panels(progress: pd.DataFrame, title: str) -> tuple[Figure, list[tuple[Axes, pd.DataFrame, str]]]:
    """One panel for the backlog batches (if any) and one for the live ones, each on its own y scale.

    A batch that drains minutes of backlog reads a hundred times more than one at the tip: on one
    axis it flattens every live batch, so it gets a narrow panel of its own. Batches that only read
    again what a table held (``replay``) are in neither.
    """
    if "replay" in progress:  # a batch that only read again what a table held is not traffic
        progress = progress[~progress["replay"]]
    backlog = progress[progress["backlog"]] if "backlog" in progress else progress.iloc[0:0]
    live = progress.drop(index=backlog.index)
    parts = [(backlog, "backlog"), (live, "live")]
    parts = [(frame, label) for frame, label in parts if len(frame)] or [(progress, "batches")]
    widths = [1 if label.startswith("backlog") else 4 for _, label in parts]
    fig, axes = plt.subplots(1, len(parts), figsize=(10, 3.5), width_ratios=widths, squeeze=False)
    fig.suptitle(title)
    for ax, (frame, label) in zip(axes[0], parts, strict=True):
        _batch_ticks(ax, frame["batch_id"])
        if len(parts) > 1:
            ax.set_title("waited before the run" if label == "backlog" else "read as it arrived", fontsize=9)
    return fig, [(ax, frame, label) for ax, (frame, label) in zip(axes[0], parts, strict=True)]


def _batch_ticks(ax: Axes, batch_ids: pd.Series) -> None:
    """Whole batch numbers on the x axis: each one when there are few (a lone batch gets no 0.99 ticks)."""
    if len(batch_ids) <= 12:
        ax.set_xticks(sorted(set(batch_ids)))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def plot_rates(progress: pd.DataFrame) -> Figure:
    """Does the ingest keep up? Per batch, the rate records arrived at beside the rate it processed them.

    One axis on a log scale, so the backlog batches (hundreds of times the live rate, shaded) and the
    live ones read on the same chart: while the processed rate stays above the arrival rate, each
    batch takes what came since the last one in less time than it took to come. Batches that only
    read again what a table held (``replay``) are left out.
    """
    if "replay" in progress:  # a batch that only read again what a table held is not traffic
        progress = progress[~progress["replay"]]
    fig, ax = plt.subplots(figsize=(10, 3.5))
    backlog = progress.loc[progress["backlog"], "batch_id"] if "backlog" in progress else progress.iloc[0:0]["batch_id"]
    if len(backlog):
        ax.axvspan(
            backlog.min() - 0.5,
            backlog.max() + 0.5,
            color="tab:gray",
            alpha=0.15,
            label="backlog: records that waited before the run",
        )
    # A rate of 0 (a batch of rejects only) has no place on a log axis: it is left a gap.
    arrived = progress["input_rows_per_s"].where(progress["input_rows_per_s"] > 0)
    processed = progress["processed_rows_per_s"].where(progress["processed_rows_per_s"] > 0)
    ax.plot(
        progress["batch_id"],
        arrived,
        marker="o",
        color="tab:blue",
        label="arrived (records read / s since the last batch)",
    )
    ax.plot(
        progress["batch_id"],
        processed,
        marker="s",
        color="tab:orange",
        label="processed (records read / s of batch time)",
    )
    ax.set_yscale("log")
    ax.set(
        xlabel="batch",
        ylabel="records per second (log scale)",
        title="Does the ingest keep up? Processed above arrived means yes",
    )
    _batch_ticks(ax, progress["batch_id"])
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_phases(progress: pd.DataFrame) -> Figure:
    """Stacked wall time of each phase, per batch: where a batch spends its time."""
    fig, panels = _panels(progress, "Batch duration by phase (write includes the Iceberg commit)")
    for ax, frame, label in panels:
        bottom = None
        for phase in WALL_PHASES:
            column = f"{phase}_s"
            if column not in frame:
                continue
            values = frame[column].fillna(0)
            ax.bar(frame["batch_id"], values, bottom=bottom, label=phase.replace("_", " "), color=PHASE_COLOURS[phase])
            bottom = values if bottom is None else bottom + values
        ax.set(xlabel=f"batch ({label})", ylabel="seconds")
        if bottom is not None and len(bottom) and bottom.max() > 0:
            ax.set_ylim(0, float(bottom.max()) * 1.3)  # room for the legend above the tallest bar
    panels[-1][0].legend(ncol=len(WALL_PHASES), fontsize=7)
    fig.tight_layout()
    return fig


def plot_lag(shard_lag: pd.DataFrame) -> Figure:
    """Per shard, how far behind its newest record the ingest was when each batch began reading.

    Args:
        shard_lag: :func:`icestream.queries.shard_lag_frame` of the batches.
    """
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for shard, frame in shard_lag.groupby("shard"):
        ax.plot(frame["batch_id"], frame["behind_before_s"].astype(float), marker="o", label=f"shard {shard}")
    after = shard_lag.groupby("batch_id")["behind_after_s"].max().astype(float)
    ax.plot(after.index, after.to_numpy(), color="black", linestyle=":", label="after the read (max over shards)")
    ax.set(
        xlabel="batch",
        ylabel="seconds behind the newest record",
        title="Lag behind the stream when each batch began reading, per shard",
    )
    ax.set_ylim(bottom=0)
    _batch_ticks(ax, shard_lag["batch_id"].drop_duplicates())
    ax.legend(fontsize=8, ncol=3)
    ax.grid(alpha=0.3)
    return fig


def plot_freshness(freshness_s: pd.Series, marks: dict[str, float]) -> Figure:
    """Histogram of per-row freshness with the percentiles marked."""
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.hist(freshness_s, bins=50, color="tab:blue", alpha=0.8)
    for (name, value), color in zip(marks.items(), ("tab:green", "tab:orange", "tab:red"), strict=False):
        ax.axvline(value, color=color, linestyle="--", label=f"{name} {value:.2f} s")
    ax.set(xlabel="seconds from Kinesis arrival to visible in the table", ylabel="rows", title="Freshness")
    ax.legend()
    return fig
