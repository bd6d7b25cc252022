"""The live dashboard's look at real tables: the window, the batches from snapshot summaries, lag and
rejects, and the dashboard loop redrawing as rows are committed between two looks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from icestream.config import Settings, load_settings
from icestream.lake.summary import BATCH_KEY, FIRST_ARRIVAL_KEY, LAST_ARRIVAL_KEY, QUERY_KEY
from icestream.lake.table import setup_tables
from icestream.plots.live import live_dashboard
from icestream.queries.live import live_frame
from icestream.timestamps import as_utc

MINUTE = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)  # arrival times of the rows (any fixed minute)


@pytest.fixture
def tables(spark, emulator: str) -> Iterator[Settings]:
    """Tables of their own, and a stream of their own: a look also asks the stream for its lag (empty: 0)."""
    from icestream.kinesis.clients import ensure_stream, kinesis_client

    suffix = uuid.uuid4().hex[:10]
    local = load_settings(table=f"live_{suffix}", stream_name=f"live-{suffix}")
    ensure_stream(local, shard_count=1)
    setup_tables(spark, local)
    yield local
    for name in (local.table_name, local.rejects_table_name):
        spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
    kinesis_client(local).delete_stream(StreamName=local.stream_name, EnforceConsumerDeletion=True)


def commit_events(spark, name: str, rows: list[tuple[str, datetime]], ingest_ts: datetime, **summary: str) -> datetime:
    """Append events ``(event_type, arrival_ts)`` written by a batch that began at ``ingest_ts``; the commit time."""
    schema = spark.table(name).schema
    data = [
        (uuid.uuid4().hex, "u-1", "s-1", kind, arrival, {}, ("web", "linux", "1.0"), "shardId-0", str(index), "u-1",
         arrival, ingest_ts)
        for index, (kind, arrival) in enumerate(rows)
    ]  # fmt: skip
    writer = spark.createDataFrame(data, schema).writeTo(name)
    for key, value in summary.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    writer.append()
    committed = spark.sql(f"SELECT max(committed_at) AS at FROM {name}.snapshots").first().at
    return as_utc(committed)


def commit_rejects(spark, name: str, reasons: list[str], ingest_ts: datetime, **summary: str) -> None:
    """Append rejects (none: an empty commit, as the ingest makes for a clean batch)."""
    schema = spark.table(name).schema
    data = [(b"{", "{", reason, "bad", 0, "shardId-0", "1", "k", MINUTE, ingest_ts) for reason in reasons]
    writer = spark.createDataFrame(data, schema).writeTo(name)
    for key, value in summary.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    writer.append()


def batch(batch_id: int, first: datetime | None = None, last: datetime | None = None) -> dict[str, str]:
    """Snapshot properties as the ingest writes them (the arrival keys only when given)."""
    summary = {BATCH_KEY: str(batch_id), QUERY_KEY: "test-query"}
    if first is not None and last is not None:
        summary[FIRST_ARRIVAL_KEY] = str(int(first.timestamp() * 1000))
        summary[LAST_ARRIVAL_KEY] = str(int(last.timestamp() * 1000))
    return summary


def test_a_look_counts_only_what_was_committed_since_the_start(spark, tables: Settings) -> None:
    events, rejects = tables.table_name, tables.rejects_table_name
    # A run before this one (its batch began an hour ago): its batch, rows and rejects stay out of the window.
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    commit_rejects(spark, rejects, ["bad_json"], hour_ago, **batch(7))
    earlier = commit_events(spark, events, [("click", MINUTE)], hour_ago, **batch(7, MINUTE, MINUTE))
    since = earlier + timedelta(milliseconds=1)
    ingest = since + timedelta(seconds=1)
    first, last = MINUTE, MINUTE + timedelta(minutes=1, seconds=6)
    rows = [("click", first), ("click", MINUTE + timedelta(seconds=30)), ("view", MINUTE + timedelta(seconds=59)),
            ("view", MINUTE + timedelta(minutes=1, seconds=5)), (None, last)]  # fmt: skip
    commit_rejects(spark, rejects, ["bad_json", "bad_json", "missing_field"], ingest, **batch(8))
    committed = commit_events(spark, events, rows, ingest, **batch(8, first, last))
    commit_rejects(spark, rejects, [], ingest, **batch(9))  # a clean batch still commits its position
    commit_events(spark, events, [("click", last)], ingest, **batch(9))  # no arrival keys: an older ingest
    commit_events(spark, events, [("click", last)], ingest)  # not an ingest batch (a load): no batch id

    now = last + timedelta(seconds=4)
    frame = live_frame(spark, tables, since, now)

    # Per 10 s of arrival; every row here arrived (MINUTE, a fixed day) before the window began.
    arrivals = frame.arrivals.assign(interval=frame.arrivals["interval"].dt.strftime("%H:%M:%S"))
    assert arrivals.to_dict("records") == [
        {"interval": "10:00:00", "before_window": True, "event_type": "click", "events": 1},
        {"interval": "10:00:30", "before_window": True, "event_type": "click", "events": 1},
        {"interval": "10:00:50", "before_window": True, "event_type": "view", "events": 1},
        {"interval": "10:01:00", "before_window": True, "event_type": "(none)", "events": 1},
        {"interval": "10:01:00", "before_window": True, "event_type": "click", "events": 2},
        {"interval": "10:01:00", "before_window": True, "event_type": "view", "events": 1},
    ]
    assert frame.events == frame.backlog_events == 7
    assert frame.batches["batch_id"].tolist() == [8, 9]
    assert frame.batches["added_records"].tolist() == [5, 1]
    assert frame.batches["rejected"].tolist() == [3, 0]
    eight, nine = frame.batches.iloc[0], frame.batches.iloc[1]
    assert eight["committed_at"] == pd.Timestamp(committed)
    assert eight["oldest_wait_s"] == pytest.approx((committed - first).total_seconds(), abs=1e-3)
    assert eight["newest_wait_s"] == pytest.approx((committed - last).total_seconds(), abs=1e-3)
    assert pd.isna(nine["oldest_wait_s"])
    assert pd.isna(nine["newest_wait_s"])
    assert frame.freshness_s == pytest.approx(
        (eight["newest_wait_s"], eight["oldest_wait_s"])
    )  # the latest timed batch
    assert frame.newest_arrival == last
    assert frame.lag_s == 0.0  # the lag is the stream's (docs/glossary.md): its own stream holds nothing uncommitted
    assert frame.rejected == 3
    assert frame.summary().iloc[0][["events", "batches", "rejected"]].tolist() == [7, 2, 3]
    shown = "\n".join(str(statement) for statement in frame.statements)
    assert f"REFRESH TABLE {events}" in shown
    assert f"FROM {events}.snapshots" in shown
    assert f"FROM {rejects}.snapshots" in shown


def test_an_empty_window_is_a_frame_not_an_error(spark, tables: Settings) -> None:
    commit_events(spark, tables.table_name, [("click", MINUTE)], MINUTE, **batch(0, MINUTE, MINUTE))
    later = datetime.now(UTC) + timedelta(hours=1)
    frame = live_frame(spark, tables, later, later)
    assert (frame.events, len(frame.batches), frame.rejected) == (0, 0, 0)
    assert frame.lag_s == 0.0  # the stream's lag, measured whatever the window holds: nothing waits
    assert frame.freshness_s is None
    assert frame.newest_arrival is None


def test_the_dashboard_redraws_what_was_committed_between_two_looks(spark, tables: Settings) -> None:
    """Two looks with a commit in between (made by the fake sleep): the second frame and image show it."""
    since = datetime.now(UTC) - timedelta(minutes=1)
    moment = [since]
    shown: list = []

    class Handle:
        def update(self, view) -> None:
            shown.append(view)

    def display(view, display_id: bool) -> Handle:
        shown.append(view)
        return Handle()

    def sleep(seconds: float) -> None:  # another process commits while the dashboard waits
        commit_events(spark, tables.table_name, [("click", MINUTE)], since + timedelta(seconds=1), **batch(0))
        moment[0] += timedelta(seconds=seconds)

    last = live_dashboard(spark, tables, seconds=2, every=2, since=since, clock=lambda: moment[0], sleep=sleep,
                          display=display, show_sql=False)  # fmt: skip
    assert [view.frame.events for view in shown] == [0, 1]
    assert last is shown[-1].frame
    assert shown[0].png != shown[1].png


def test_a_look_sees_commits_made_by_another_writer(spark, tables: Settings) -> None:
    """Spark's Iceberg catalog caches a table it has loaded; a look refreshes it, so commits from
    another process show at the next look. A second session has its own catalog and cache, as
    another process would."""
    since = datetime.now(UTC) - timedelta(minutes=1)
    commit_events(spark, tables.table_name, [("click", MINUTE)], since + timedelta(seconds=1), **batch(0))
    assert live_frame(spark, tables, since).events == 1
    commit_events(spark.newSession(), tables.table_name, [("view", MINUTE)], since + timedelta(seconds=2), **batch(1))
    frame = live_frame(spark, tables, since)
    assert (frame.events, frame.batches["batch_id"].tolist()) == (2, [0, 1])
