"""The live dashboard: what one frame draws, and the loop's looks, bound, end and display handle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from icestream.lake.statement import Statement
from icestream.plots import live as live_plots
from icestream.plots.live import live_dashboard, live_figure
from icestream.queries.live import LiveFrame
from icestream.workbook.runner import HEADLESS_ENV

START = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
STATEMENTS = (Statement("REFRESH TABLE lake.ns.t"), Statement("SELECT 1 FROM lake.ns.t"))


def make_frame(
    now: datetime = START, events: int = 0, timed: bool = True, lag: float | None = 0.0, backlog: int = 0
) -> LiveFrame:
    """A frame of ``events`` clicks and views arrived in its first 20 s, in two batches (arrival keys if ``timed``),
    and ``backlog`` clicks that arrived a minute before it began."""
    intervals = pd.to_datetime([START - timedelta(minutes=1), START, START, START + timedelta(seconds=10)], utc=True)
    arrivals = pd.DataFrame(
        {"interval": intervals, "before_window": [True, False, False, False],
         "event_type": ["click", "click", "view", "click"]}
    ).assign(events=[backlog, events // 2, events - events // 2, 0]).query("events > 0")  # fmt: skip
    events += backlog
    waits = [3.0, 1.5] if timed else [None, None]
    batches = pd.DataFrame(
        {"batch_id": [0, 1], "snapshot_id": [11, 12], "committed_at": pd.to_datetime([START, START], utc=True),
         "added_records": [events, 0], "rejected": [2, 0], "first_arrival": pd.NaT, "last_arrival": pd.NaT,
         "oldest_wait_s": waits, "newest_wait_s": [w and w / 3 for w in waits]}
    ).iloc[: 2 if events else 0]  # fmt: skip
    newest = START if events else None
    rejected = 2 if events else 0
    return LiveFrame(START, now, arrivals.reset_index(drop=True), batches, rejected, newest, STATEMENTS, lag)


def test_a_frame_draws_rates_by_type_and_waits_per_batch_with_units() -> None:
    fig = live_figure(make_frame(START + timedelta(seconds=5), events=10, lag=2.0))
    rates, waits = fig.axes
    assert rates.get_title() == "Arrivals since the start, per 10 s, by type"
    assert (rates.get_xlabel(), rates.get_ylabel()) == ("Kinesis arrival (UTC)", "events per 10 s")
    assert [text.get_text() for text in rates.get_legend().get_texts()] == ["click", "view"]
    assert sorted(patch.get_height() for patch in rates.patches) == [5, 5]
    assert not rates.texts
    assert waits.get_ylabel() == "seconds from Kinesis arrival to commit"
    assert [list(line.get_ydata()) for line in waits.get_lines()] == [[3.0, 1.5], [1.0, 0.5]]
    title = fig.get_suptitle()
    assert "10 events, 2 batches, 2 rejects, lag 2.0 s, latest batch's freshness 0.5-1.5 s" in title


def test_an_empty_frame_draws_and_says_so() -> None:
    fig = live_figure(make_frame(lag=None))
    rates, waits = fig.axes
    assert not rates.patches
    assert not waits.get_lines()
    assert [text.get_text() for text in rates.texts] == ["no events committed in this window yet"]
    assert [text.get_text() for text in waits.texts] == ["no batch committed yet"]
    assert "0 events, 0 batches, 0 rejects, lag -, latest batch's freshness -" in fig.get_suptitle()


def test_a_drained_stream_idle_for_minutes_shows_lag_0_and_the_frame_keeps_it() -> None:
    # The lag is the stream's, measured at the look: an hour after the last commit it is still 0.
    frame = make_frame(START + timedelta(hours=1), events=10, lag=0.0)
    assert frame.lag_s == 0.0
    assert frame.summary().iloc[0][["lag_s", "freshness_min_s", "freshness_max_s"]].tolist() == [0.0, 0.5, 1.5]


def test_a_backlog_is_a_line_of_text_not_a_bar_beside_the_live_arrivals() -> None:
    fig = live_figure(make_frame(START + timedelta(seconds=20), events=10, backlog=30_000))
    rates = fig.axes[0]
    assert sorted(patch.get_height() for patch in rates.patches) == [5, 5]  # the live ones only
    assert rates.get_title().splitlines() == [
        "Arrivals since the start, per 10 s, by type",
        "and 30,000 backlog events written (arrived before 10:00:00)",
    ]
    assert "30,010 events" in fig.get_suptitle()


def test_only_a_backlog_says_so_instead_of_bars() -> None:
    rates = live_figure(make_frame(START + timedelta(seconds=20), backlog=500)).axes[0]
    assert not rates.patches
    assert [text.get_text() for text in rates.texts] == ["no arrivals since the start yet"]
    assert rates.get_title().endswith("and 500 backlog events written (arrived before 10:00:00)")


def test_time_ticks_are_each_shown_once() -> None:
    fig = live_figure(make_frame(START + timedelta(minutes=2), events=10))
    fig.canvas.draw()
    labels = [label.get_text() for label in fig.axes[0].get_xticklabels() if label.get_text()]
    assert labels
    assert len(labels) == len(set(labels)), labels


def test_batches_without_arrival_times_show_a_note_not_a_line() -> None:
    _, waits = live_figure(make_frame(events=4, timed=False)).axes
    assert not waits.get_lines()
    assert [text.get_text() for text in waits.texts] == ["no arrival times in the snapshot summaries"]


class FakeWorld:
    """A clock that moves only when the dashboard sleeps, a display that records, and frames that grow."""

    def __init__(self) -> None:
        self.now = START
        self.sleeps: list[float] = []
        self.shown: list[tuple[str, object]] = []
        self.looks: list[datetime] = []

    def clock(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += timedelta(seconds=seconds)

    def display(self, view, display_id: bool):
        assert display_id is True
        self.shown.append(("display", view))
        world = self

        class Handle:
            def update(self, view) -> None:
                world.shown.append(("update", view))

        return Handle()

    def live_frame(self, spark, settings, since: datetime, now: datetime) -> LiveFrame:
        self.looks.append(now)
        return make_frame(now, events=2 * len(self.looks))


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> FakeWorld:
    monkeypatch.delenv(HEADLESS_ENV, raising=False)
    fake = FakeWorld()
    monkeypatch.setattr(live_plots, "live_frame", fake.live_frame)
    return fake


def run(world: FakeWorld, **options) -> LiveFrame:
    return live_dashboard(None, None, clock=world.clock, sleep=world.sleep, display=world.display, **options)


def test_looks_every_few_seconds_until_the_bound_then_returns_the_last_frame(world: FakeWorld) -> None:
    open_before = plt.get_fignums()
    last = run(world, seconds=5, every=2, show_sql=False)
    assert world.looks == [START + timedelta(seconds=step) for step in (0, 2, 4, 5)]
    assert world.sleeps == [2, 2, 1]  # never past the bound
    assert [kind for kind, _ in world.shown] == ["display", "update", "update", "update"]  # one output, redrawn
    assert last is world.shown[-1][1].frame
    assert last.events == 8
    pngs = [view.png for _, view in world.shown]
    assert len(set(pngs)) == len(pngs)  # each look drew what it saw
    assert plt.get_fignums() == open_before  # no figure left behind


def test_ends_with_one_last_look_once_the_query_has_stopped(world: FakeWorld) -> None:
    class Query:
        @property
        def is_active(self) -> bool:
            return len(world.looks) < 2  # stops during the second look

    last = run(world, seconds=600, every=2, query=Query(), show_sql=False)
    assert len(world.looks) == 3
    assert last.now == START + timedelta(seconds=4)


def test_headless_it_waits_for_the_query_without_looking_then_draws_the_last_frame_once(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Query:
        @property
        def is_active(self) -> bool:
            return world.now < START + timedelta(seconds=7)

    monkeypatch.setenv(HEADLESS_ENV, "1")  # what icestream run sets for its kernels
    last = run(world, seconds=600, every=2, query=Query(), show_sql=False)
    assert world.looks == [START + timedelta(seconds=8)], "one look, after the query stopped"
    assert [kind for kind, _ in world.shown] == ["display"]
    assert last.now == START + timedelta(seconds=8)


def test_headless_without_a_query_looks_once_at_the_bound(world: FakeWorld) -> None:
    last = run(world, seconds=5, every=2, show_sql=False, headless=True)
    assert world.looks == [START + timedelta(seconds=5)]
    assert world.sleeps == [2, 2, 1]
    assert last.events == 2


def test_the_window_starts_a_lookback_before_the_first_look_unless_given(world: FakeWorld, monkeypatch) -> None:
    windows = []

    def look(spark, settings, since: datetime, now: datetime) -> LiveFrame:
        windows.append(since)
        return make_frame(now)

    monkeypatch.setattr(live_plots, "live_frame", look)
    run(world, seconds=0)
    given = START - timedelta(minutes=1)
    run(world, seconds=0, since=given)
    assert windows == [START - live_plots.LOOKBACK, given]


def test_prints_the_statements_once_under_the_chart(world: FakeWorld, capsys: pytest.CaptureFixture[str]) -> None:
    run(world, seconds=4, every=2)
    printed = capsys.readouterr().out
    assert printed == "REFRESH TABLE lake.ns.t\n\nSELECT 1 FROM lake.ns.t\n"


def test_the_view_is_a_png_with_a_line_of_text() -> None:
    view = live_plots.LiveView(make_frame(START + timedelta(seconds=3), events=6, lag=3.0))
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"image/png", "text/plain"}
    assert view.png.startswith(b"\x89PNG")
    assert bundle["text/plain"] == (
        "10:00:03 UTC: 6 events, 2 batches, 2 rejects, lag 3.0 s, latest batch's freshness 0.5-1.5 s"
    )
