"""Charts of the row-level notebook (05): copy-on-write against merge-on-read, statement by statement."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

MODE_COLOURS = {"copy-on-write": "tab:blue", "merge-on-read": "tab:orange"}


def modes_compared(costs: pd.DataFrame, title: str = "The same changes, two ways of writing them") -> Figure:
    """Rows each statement wrote, and the read afterwards, per row-level mode.

    Args:
        costs: One row per statement and mode: ``statement``, ``mode``, ``rows written`` (data rows),
            ``deletes written`` (the rows the commit deleted by position: its own, not the earlier ones
            its delete files carry over, :data:`icestream.lake.rowlevel.POSITION_DELETES`), ``read ms``
            (a full read after the statement).
        title: The figure's title.

    Returns:
        The figure: rows written (data solid, delete entries hatched) on the left, read time on the right.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    statements = list(dict.fromkeys(costs["statement"]))
    modes = list(dict.fromkeys(costs["mode"]))
    positions = np.arange(len(statements))
    width = 0.8 / len(modes)
    fig, (files, reads) = plt.subplots(1, 2, figsize=(11, 4))
    for index, mode in enumerate(modes):
        mine = costs[costs["mode"] == mode].set_index("statement").reindex(statements)
        offset = positions + (index - (len(modes) - 1) / 2) * width
        colour = MODE_COLOURS.get(mode, f"C{index}")
        files.bar(offset, mine["rows written"], width, color=colour, label=f"{mode}: data rows")
        files.bar(
            offset,
            mine["deletes written"],
            width,
            bottom=mine["rows written"],
            color=colour,
            hatch="//",
            alpha=0.5,
            label=f"{mode}: position deletes",
        )
        reads.bar(offset, mine["read ms"], width, color=colour, label=mode)
    for axis in (files, reads):
        axis.set_xticks(positions, statements)
    files.set(ylabel="rows written by the statement", title="Writes")
    reads.set(ylabel="reading every live row afterwards (ms)", title="Reads")
    files.legend(fontsize=8)
    reads.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def metrics_growth(growth: pd.DataFrame, title: str = "real_time_metrics as the ingest keeps it") -> Figure:
    """Events per minute the metrics table held after each part of a stream was ingested.

    Args:
        growth: ``part``, ``minute``, ``events`` (:class:`icestream.demos.metrics_demo.MetricsDemo`).
        title: The figure's title.

    Returns:
        The figure: one line per part, so minutes that grow after they were first shown (late
        events folded into their own minute) stand out.
    """
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(11, 3.8))
    parts = sorted(growth["part"].unique())
    for index, part in enumerate(parts):
        mine = growth[growth["part"] == part].sort_values("minute")
        axis.plot(
            mine["minute"],
            mine["events"],
            marker=".",
            linewidth=1.2,
            color=f"C{index}",
            label=f"after part {part}: {int(mine['events'].sum()):,} events",
        )
    axis.set(xlabel="minute of event time (UTC)", ylabel="events in the minute", title=title)
    axis.legend(fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig
