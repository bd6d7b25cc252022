"""Charts of an ingest run: rates, time per phase, lag behind the stream, freshness."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# Wall-clock phases of a batch, in order. "parse" is left out: it runs inside the read tasks and is
# reported as task time summed over shards, so it is part of "read" here.
WALL_PHASES = ("plan", "read", "dedupe", "write_rejects", "write_events")


def plot_rates(progress: pd.DataFrame) -> Figure:
    """Input rate (records arriving per second of wall time) beside processing rate, per batch."""
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.plot(progress["batch_id"], progress["input_rows_per_s"], marker="o", label="input (records/s since last batch)")
    ax.plot(
        progress["batch_id"], progress["processed_rows_per_s"], marker="s", label="processed (records/s of batch time)"
    )
    ax.set(xlabel="batch", ylabel="records per second", title="Ingest rates per batch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # batch ids are whole numbers
    ax.legend()
    ax.grid(alpha=0.3)
    return fig


def plot_phases(progress: pd.DataFrame) -> Figure:
    """Stacked wall time of each phase, per batch: where a batch spends its time."""
    fig, ax = plt.subplots(figsize=(9, 3.5))
    bottom = None
    for phase in WALL_PHASES:
        column = f"{phase}_s"
        if column not in progress:
            continue
        values = progress[column].fillna(0)
        ax.bar(progress["batch_id"], values, bottom=bottom, label=phase.replace("_", " "))
        bottom = values if bottom is None else bottom + values
    ax.set(xlabel="batch", ylabel="seconds", title="Batch duration by phase (write includes the Iceberg commit)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # batch ids are whole numbers
    ax.legend(ncol=len(WALL_PHASES), fontsize=8)
    return fig


def plot_lag(progress: pd.DataFrame) -> Figure:
    """How far behind the newest record the ingest was when each batch finished reading."""
    fig, ax = plt.subplots(figsize=(9, 3))
    ax.plot(progress["batch_id"], progress["behind_s"], marker="o", color="tab:purple")
    ax.set(xlabel="batch", ylabel="seconds behind latest", title="Lag behind the stream (max over shards)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # batch ids are whole numbers
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
