"""Charts of the real-time notebook (03): events per minute by type, and the device split."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

    import pandas as pd
    from matplotlib.figure import Figure


def events_per_minute(
    per_minute: pd.DataFrame, title: str = "Events per minute by type", live_from: datetime | None = None
) -> Figure:
    """Stacked areas of events per minute, one band per event type, each in its own colour.

    Args:
        per_minute: Rows of ``minute``, ``event_type``, ``events`` (``realtime.events_per_minute``).
        title: Chart title.
        live_from: Where live production starts (event time, UTC): a line marks the step from the
            backfill's rate to the live producer's, with both rates, so the jump reads as a change
            of producer, not as an anomaly.

    Returns:
        The figure.
    """
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    import pandas as pd

    wide = per_minute.pivot_table(index="minute", columns="event_type", values="events", aggfunc="sum", fill_value=0)
    wide = wide[wide.sum().sort_values(ascending=False).index]  # biggest band at the bottom
    fig, ax = plt.subplots(figsize=(10, 4.5))
    if not wide.empty:
        colours = plt.get_cmap("tab20")  # 20 listed colours: colours(index) is the index-th
        ax.stackplot(
            wide.index,
            wide.T.to_numpy(),
            labels=wide.columns,
            linewidth=0,
            colors=[colours(index % colours.N) for index in range(len(wide.columns))],
        )
        ax.legend(ncol=3, fontsize=8, loc="upper left")
        if live_from is not None:
            step = (
                pd.Timestamp(live_from).tz_localize(None) if pd.Timestamp(live_from).tzinfo else pd.Timestamp(live_from)
            )
            before, after = producer_rates(wide.sum(axis=1), step)
            if before is not None:
                ax.axvline(mdates.date2num(step), color="black", linestyle="--", linewidth=1)
                rates = (
                    f"{before:,.0f} → {after:,.0f} events/min" if after is not None else "its minutes here are partial"
                )
                ax.annotate(
                    f"backfill → live producer\n{rates} (a change of producer, not an anomaly)",
                    xy=(step, after if after is not None else before),
                    xytext=(-10, 0),
                    textcoords="offset points",
                    ha="right",
                    va="center",
                    fontsize=8,
                    bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85},
                )
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


def producer_rates(totals: pd.Series, step: pd.Timestamp) -> tuple[float | None, float | None]:
    """The median events per minute of whole minutes before and after a change of producer.

    The minute the change falls in holds both producers' events, and the newest minute is still
    filling: neither counts, so a short live part shows no "after" rate rather than a wrong one.

    Args:
        totals: Events per minute, indexed by the minute's start (naive UTC).
        step: When the second producer started (naive UTC).

    Returns:
        ``(before, after)``: each None when no whole minute lies on that side.
    """
    import pandas as pd

    minute = pd.Timedelta(minutes=1)
    whole = totals.iloc[:-1] if len(totals) else totals  # the newest minute is still filling
    before = whole[pd.DatetimeIndex(whole.index) + minute <= step]
    after = whole[whole.index >= step]
    return (
        float(before.median()) if len(before) else None,
        float(after.median()) if len(after) and len(before) else None,
    )
