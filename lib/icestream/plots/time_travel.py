"""Charts of the time-travel notebook (04): events by type at two snapshots."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


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
