"""Charts of the real-time notebook (03): events per minute by type, and the device split."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime

    import pandas as pd
    from matplotlib.figure import Figure


def events_per_minute(
    per_minute: pd.DataFrame, title: str = "Events per minute by type", live_from: datetime | None = None
) -> Figure:
    """Stacked areas of events per minute, one band per event type, each in its own colour.

    Where the minutes span a change of producer (``live_from``), each producer gets a panel with its
    own y-axis: 01's backfill sends a few events a second and the live producer tens of times more, so
    on one axis the backfill's hour is a sliver under the live spike. The rates of both, from whole
    minutes, are stated on the live panel, so the jump reads as a change of producer, not an anomaly.

    Args:
        per_minute: Rows of ``minute``, ``event_type``, ``events`` (``realtime.events_per_minute``).
        title: Chart title.
        live_from: Where live production starts (event time, UTC).

    Returns:
        The figure.
    """
    import matplotlib.pyplot as plt
    import pandas as pd

    wide = per_minute.pivot_table(index="minute", columns="event_type", values="events", aggfunc="sum", fill_value=0)
    wide = wide[wide.sum().sort_values(ascending=False).index]  # biggest band at the bottom
    colours = plt.get_cmap("tab20")  # 20 listed colours: colours(index) is the index-th
    colour = {name: colours(index % colours.N) for index, name in enumerate(wide.columns)}
    step = None
    if live_from is not None and not wide.empty:
        step = pd.Timestamp(live_from).tz_localize(None) if pd.Timestamp(live_from).tzinfo else pd.Timestamp(live_from)
    before = wide[wide.index < step.floor("min")] if step is not None else wide
    after = wide[wide.index >= step.floor("min")] if step is not None else wide.iloc[:0]
    if step is None or before.empty or after.empty:  # one producer in view: one panel
        fig, ax = plt.subplots(figsize=(10, 4.5))
        _stacked(ax, wide, colour)
        ax.set_title(title)
        fig.tight_layout()
        return fig
    fig, (ax_before, ax_after) = plt.subplots(
        1, 2, figsize=(10, 4.5), gridspec_kw={"width_ratios": [3, 1]}, layout="constrained"
    )
    _stacked(ax_before, before, colour)
    _stacked_bars(ax_after, after, colour)  # a few minutes: bars, not a ramp from zero
    ax_before.set_title("01's backfill", fontsize=10)
    ax_after.set_title("live producer (its own y-axis)", fontsize=10)
    rate_before, rate_after = producer_rates(wide.sum(axis=1), step)
    rates = (
        f"{rate_before:,.0f} → {rate_after:,.0f} events/min"
        if rate_before is not None and rate_after is not None
        else "its minutes here are partial"
    )
    ax_after.annotate(
        f"backfill → live producer\n{rates}\n(a change of producer,\nnot an anomaly)",
        xy=(0.5, 0.98), xycoords="axes fraction", ha="center", va="top", fontsize=7,
        bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85},
    )  # fmt: skip
    ax_after.set_ylim(top=ax_after.get_ylim()[1] * 1.35)  # room for the note above the bars
    fig.suptitle(title)
    return fig


def _stacked_bars(ax: Any, wide: pd.DataFrame, colour: dict[str, Any]) -> None:
    """One panel of stacked bars, a bar a minute, labelled with the minute."""
    bottom = [0] * len(wide)
    for name in wide.columns:
        ax.bar(range(len(wide)), wide[name].to_numpy(), bottom=bottom, color=colour[name], width=0.8)
        bottom = [low + high for low, high in zip(bottom, wide[name].to_numpy(), strict=True)]
    ax.set_xticks(range(len(wide)), [f"{minute:%H:%M}" for minute in wide.index])
    ax.set(xlabel="event time, minute (UTC)")


def _stacked(ax: Any, wide: pd.DataFrame, colour: dict[str, Any]) -> None:
    """One panel of stacked areas (minutes × event types), with its axes labelled."""
    import matplotlib.dates as mdates

    if not wide.empty:
        ax.stackplot(
            wide.index,
            wide.T.to_numpy(),
            labels=wide.columns,
            linewidth=0,
            colors=[colour[name] for name in wide.columns],
        )
        ax.legend(ncol=3, fontsize=8, loc="upper left")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    ax.set(xlabel="event time, minute (UTC)", ylabel="events per minute")


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
