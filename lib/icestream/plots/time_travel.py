"""Charts of the time-travel notebook (04): the table's growth by snapshot, counts at two points."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# One colour per kind of commit, the same in every chart of it.
OPERATION_COLOURS = {"append": "tab:blue", "replace": "tab:orange", "overwrite": "tab:red", "delete": "tab:purple"}


def table_growth(snapshots: pd.DataFrame, title: str = "Rows in the table, snapshot by snapshot") -> Figure:
    """Total rows after each snapshot over commit time, marked by operation.

    Args:
        snapshots: ``committed_at``, ``total_records``, ``operation`` (``LakeTable.inspect.snapshots()``).
        title: Chart title.

    Returns:
        The figure.
    """
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    import matplotlib.ticker as mticker

    fig, ax = plt.subplots(figsize=(10, 4))
    ax.step(snapshots["committed_at"], snapshots["total_records"], where="post", color="grey", linewidth=1)
    colours = plt.get_cmap("tab10").colors
    for index, (operation, group) in enumerate(snapshots.groupby("operation")):
        ax.scatter(group["committed_at"], group["total_records"], s=14, label=operation, zorder=3,
                   color=OPERATION_COLOURS.get(operation, colours[index % len(colours)]))  # fmt: skip
    ax.set_ylim(bottom=0)  # rows from zero: a growth of a few percent must not look like a tenfold one
    ax.yaxis.set_major_formatter(mticker.StrMethodFormatter("{x:,.0f}"))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    ax.set(xlabel="commit time (UTC)", ylabel="rows in the table (total-records)", title=title)
    ax.legend(title="operation", fontsize=8)
    fig.tight_layout()
    return fig


def counts_compared(compared: pd.DataFrame, before_label: str, after_label: str, title: str) -> Figure:
    """Grouped bars of events by type at two points in time.

    Args:
        compared: ``event_type``, ``before``, ``after`` (``LakeTable.versions.compare_counts_by_type``).
        before_label: Legend label of the earlier point.
        after_label: Legend label of the later point.
        title: Chart title.

    Returns:
        The figure.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    ordered = compared.sort_values("after", ascending=False)
    positions = np.arange(len(ordered))
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.bar(positions - 0.2, ordered["before"], width=0.4, label=before_label, color="tab:grey")
    ax.bar(positions + 0.2, ordered["after"], width=0.4, label=after_label, color="tab:blue")
    ax.set_xticks(positions, ordered["event_type"], rotation=30, ha="right")
    ax.set(xlabel="event type", ylabel="events", title=title)
    ax.legend()
    fig.tight_layout()
    return fig
