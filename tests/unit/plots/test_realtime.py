"""The events-per-minute chart marks the change of producer with rates of whole minutes only."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from datetime import UTC, datetime

import matplotlib.pyplot as plt
import pandas as pd

from icestream.plots.realtime import events_per_minute, producer_rates

# Ten minutes of backfill at 170 events/min, live production at 6,000/min from 10:10:20: the 10:10
# minute holds both, 10:11 is whole, 10:12 is still filling when the chart is drawn.
COUNTS = [170] * 10 + [170 * 20 // 60 + 6000 * 40 // 60, 6000, 3000]
MINUTES = pd.date_range("2026-11-25 10:00", periods=len(COUNTS), freq="min")
STEP = pd.Timestamp("2026-11-25 10:10:20")


def test_the_mixed_minute_and_the_filling_one_do_not_count() -> None:
    assert producer_rates(pd.Series(COUNTS, index=MINUTES), STEP) == (170.0, 6000.0)


def test_a_live_part_without_a_whole_minute_has_no_after_rate() -> None:
    short = pd.Series(COUNTS[:12], index=MINUTES[:12])  # 10:11 is now the newest, still filling
    assert producer_rates(short, STEP) == (170.0, None)
    assert producer_rates(pd.Series([4057], index=MINUTES[10:11]), STEP) == (None, None)


def test_the_chart_states_the_whole_minutes_rates() -> None:
    per_minute = pd.DataFrame({"minute": MINUTES, "event_type": "click", "events": COUNTS})
    fig = events_per_minute(per_minute, live_from=datetime(2026, 11, 25, 10, 10, 20, tzinfo=UTC))
    texts = [text.get_text() for ax in fig.axes for text in ax.texts]
    plt.close(fig)
    assert texts == ["backfill → live producer\n170 → 6,000 events/min\n(a change of producer,\nnot an anomaly)"]


def test_each_producer_fills_a_panel_of_its_own() -> None:
    """03's chart drew 59 minutes of backfill as a sliver under the live spike on one y-axis: each producer
    now has its panel, and the backfill's minutes reach at least half of their panel's height."""
    per_minute = pd.DataFrame({"minute": MINUTES, "event_type": "click", "events": COUNTS})
    fig = events_per_minute(per_minute, live_from=datetime(2026, 11, 25, 10, 10, 20, tzinfo=UTC))
    backfill, live = fig.axes[:2]
    heights = [ax.get_ylim()[1] for ax in (backfill, live)]
    plt.close(fig)
    assert heights[0] / 2 <= 170, heights
    assert max(COUNTS) <= heights[1], heights


def test_one_producer_in_view_is_one_panel() -> None:
    per_minute = pd.DataFrame({"minute": MINUTES[:10], "event_type": "click", "events": COUNTS[:10]})
    fig = events_per_minute(per_minute, live_from=datetime(2026, 11, 25, 10, 10, 20, tzinfo=UTC))
    panels = len(fig.axes)
    plt.close(fig)
    assert panels == 1
