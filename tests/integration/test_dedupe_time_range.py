"""Dedupe at the ends of the time range the parser accepts (issue 43, items 2 and 3).

Real payloads carry ``0001-01-01T00:00:00Z`` (Go's zero time, .NET's ``DateTime.MinValue``) and
far-future placeholders (``9999-12-31``); both must be deduplicated like any other event, and
neither may cost the index its contents.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from icestream.ingest.query import start_ingest
from icestream.timestamps import to_micros
from tests.helpers.ingest import drain, table_state
from tests.helpers.streams import event_payload, put
from tests.helpers.waiting import wait_until

ZERO_TIME = "0001-01-01T00:00:00Z"
FAR_FUTURE = "9999-12-31T23:59:59Z"


def dated(event_id: str, event_ts: str) -> tuple[bytes, str]:
    """A valid event ``event_id`` whose event time is the text ``event_ts``."""
    document = json.loads(event_payload(0, "u1", event_id))
    document["event_ts"] = event_ts
    return json.dumps(document).encode(), "u1"


def now_text() -> str:
    """The wall clock as the producers write it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def settle(query: Any, batches: int) -> dict[str, Any]:
    """Wait until ``query`` has made ``batches`` batches; return the last one's progress."""

    def taken() -> bool:
        assert query.is_active, query.exception()
        return len(query.recent_progress) >= batches

    wait_until(taken, timeout=120, message=f"batch {batches} to take the records")
    return query.recent_progress[-1]


def identity(frame: Any) -> Any:
    """A transform that changes nothing (with a transform the index is read from the table every batch)."""
    return frame


@pytest.mark.parametrize("transform", [None, identity], ids=["learned", "reloaded"])
def test_an_event_dated_year_one_is_written_once_within_a_run_and_across_restarts(spark, fresh, transform) -> None:
    settings = fresh(shards=1)
    query = start_ingest(spark, settings, trigger_seconds=0.2, transform=transform)
    try:
        for batch in (1, 2, 3):  # the producer's retries, each taken by a later batch of one query
            put(settings, [dated("zero", ZERO_TIME)])
            settle(query, batch)
    finally:
        query.stop()
    assert table_state(spark, settings)[0] == {"zero": 1}, "within one run"
    for _ in range(2):  # and again after a restart: the index is built from the table
        put(settings, [dated("zero", ZERO_TIME)])
        drain(spark, settings)
    assert table_state(spark, settings)[0] == {"zero": 1}, "across restarts"
    stored = spark.table(settings.table_name).selectExpr("unix_micros(event_ts) AS micros").first().micros
    assert stored == to_micros(datetime(1, 1, 1, tzinfo=UTC)), "the row holds the instant sent, not a rebased one"


def test_one_far_future_event_does_not_empty_the_index(spark, fresh) -> None:
    settings = fresh(shards=1)
    query = start_ingest(spark, settings, trigger_seconds=0.2)
    try:
        started = now_text()
        put(settings, [dated(f"ev-{i}", started) for i in range(5)])
        first = settle(query, 1)["dedupe_index"]
        put(settings, [dated("future", FAR_FUTURE)])
        settle(query, 2)
        for batch in (3, 4, 5):  # new events, and a retry of one that arrived before the far-future one
            put(settings, [dated(f"ev-{batch}-{i}", now_text()) for i in range(3)] + [dated("ev-0", started)])
            settle(query, batch)
        put(settings, [dated("future", FAR_FUTURE)])  # its own retry, found in the index too
        last = settle(query, 6)["dedupe_index"]
    finally:
        query.stop()
    assert first["loads"] == 1
    assert last["loads"] == 1, "the far-future event's batch evicted every id: each later batch read the table"
    assert last["ids"] == 5 + 1 + 3 * 3
    events, _ = table_state(spark, settings)
    assert max(events.values()) == 1
    assert [batch["deduplicated"] for batch in query.recent_progress] == [0, 0, 1, 1, 1, 1]
