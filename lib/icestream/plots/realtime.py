"""Charts of the real-time notebook (03): events per minute by type, and the device split."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


def events_per_minute(per_minute: pd.DataFrame, title: str = "Events per minute by type") -> Figure:
    """Stacked areas of events per minute, one band per event type.

    Args:
        per_minute: Rows of ``minute``, ``event_type``, ``events`` (the per-minute view).
        title: Chart title.

    Returns:
        The figure.
    """
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    wide = per_minute.pivot_table(index="minute", columns="event_type", values="events", aggfunc="sum", fill_value=0)
    wide = wide[wide.sum().sort_values(ascending=False).index]  # biggest band at the bottom
    fig, ax = plt.subplots(figsize=(10, 4.5))
    if not wide.empty:
        ax.stackplot(wide.index, wide.T.to_numpy(), labels=wide.columns, linewidth=0)
        ax.legend(ncol=3, fontsize=8, loc="upper left")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    ax.set(xlabel="event time, minute (UTC)", ylabel="events per minute", title=title)
    fig.tight_layout()
    return fig


def device_split(by_device: pd.DataFrame, title: str = "Events by device type") -> Figure:
    """Horizontal bars of events per device type, labelled with their share.

    Args:
        by_device: ``device_type``, ``events``, ``share`` (the dashboard's ``by_device``).
        title: Chart title.

    Returns:
        The figure.
    """
    import matplotlib.pyplot as plt

    ordered = by_device.sort_values("events")
    fig, ax = plt.subplots(figsize=(7, 0.6 * max(len(ordered), 2) + 1))
    bars = ax.barh(ordered["device_type"], ordered["events"], color="tab:blue")
    for bar, share in zip(bars, ordered["share"], strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {100 * share:.1f} %", va="center")
    ax.set(xlabel="events", ylabel="device type", title=title)
    ax.margins(x=0.15)
    fig.tight_layout()
    return fig
