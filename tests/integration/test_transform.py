"""The ingest transform: named from the CLI, changing rows and routing some to rejects, exactly once."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from icestream.cli import main
from icestream.config import Settings
from icestream.errors import IngestError
from icestream.ingest.transform import DETAIL_COLUMN, REASON_COLUMN
from tests.helpers.crash import crash_at
from tests.helpers.ingest import drain, refresh_tables
from tests.helpers.streams import event_payload, put, send_aggregated, user_records

BLOCKED_USER = "u3"


def route_blocked_users(frame):
    """Reject the events of BLOCKED_USER (with a reason and a detail), tag every other event."""
    from pyspark.sql import functions as F  # noqa: N812

    blocked = F.col("user_id") == F.lit(BLOCKED_USER)
    return (
        frame.withColumn(REASON_COLUMN, F.when(blocked, F.lit("blocked_user")))
        .withColumn(DETAIL_COLUMN, F.when(blocked, F.concat(F.lit("user "), F.col("user_id"))))
        .withColumn("properties", F.map_concat("properties", F.create_map(F.lit("checked"), F.lit("yes"))))
    )


def records(first: int, count: int) -> tuple[list[tuple[bytes, str]], set[str], set[str]]:
    """Events of five users, plus one malformed record; returns them, the kept ids and the blocked ids."""
    sent, kept, blocked = [], set(), set()
    for number in range(first, first + count):
        user = f"u{number % 5}"
        sent.append((event_payload(number, user), user))
        (blocked if user == BLOCKED_USER else kept).add(f"ev-{number}")
    sent.append((b"not json", "u0"))
    return sent, kept, blocked


def state(spark, settings: Settings) -> tuple[Counter, Counter]:
    refresh_tables(spark, settings)  # read what the last commit holds, not a table object cached earlier
    events = Counter(row.event_id for row in spark.table(settings.table_name).select("event_id").collect())
    reasons = Counter(row.reason for row in spark.table(settings.rejects_table_name).select("reason").collect())
    return events, reasons


def test_a_transform_changes_rows_and_routes_some_to_rejects(spark, fresh) -> None:
    settings = fresh(shards=2, prefix="tf")
    sent, kept, blocked = records(0, 60)
    put(settings, sent)
    query = drain(spark, settings, transform=route_blocked_users)

    events, reasons = state(spark, settings)
    assert set(events) == kept
    assert max(events.values()) == 1
    assert reasons == Counter({"blocked_user": len(blocked), "invalid_json": 1})
    assert {row.properties["checked"] for row in spark.table(settings.table_name).collect()} == {"yes"}
    row = spark.table(settings.rejects_table_name).where("reason = 'blocked_user'").first()
    assert row.detail == f"user {BLOCKED_USER}"
    assert row.raw_text.startswith('{"event_id":"ev-')
    assert row.shard_id.startswith("shardId-")
    progress = list(query.recent_progress)
    assert sum(batch["rejected"] for batch in progress) == len(blocked) + 1
    assert sum(batch["written"] for batch in progress) == len(kept)
    assert sum(batch["transform_dropped"] for batch in progress) == 0


@pytest.mark.parametrize("phase", ["between_commits", "after_commit"])
def test_routed_rejects_are_written_once_across_a_crash(spark, fresh, phase: str) -> None:
    settings = fresh(shards=2, prefix="tf")
    sent, kept, blocked = records(0, 40)
    put(settings, sent)

    with pytest.raises(IngestError, match="SimulatedCrashError"):
        drain(spark, settings, transform=route_blocked_users, fault_hook=crash_at(phase), batch_retries=0)
    drain(spark, settings, transform=route_blocked_users)

    events, reasons = state(spark, settings)
    assert set(events) == kept
    assert max(events.values()) == 1
    assert reasons == Counter({"blocked_user": len(blocked), "invalid_json": 1})
    routed = [
        row.raw_text for row in spark.table(settings.rejects_table_name).where("reason = 'blocked_user'").collect()
    ]
    assert len(set(routed)) == len(routed)


def route_even_events(frame):
    """Reject every event whose number (``ev-<n>``) is even."""
    from pyspark.sql import functions as F  # noqa: N812

    even = F.substring_index("event_id", "-", -1).cast("int") % 2 == 0
    return frame.withColumn(REASON_COLUMN, F.when(even, F.lit("even")))


def test_routed_rejects_inside_kpl_aggregates_are_written_once_across_a_crash(spark, fresh) -> None:
    """Batches end inside aggregates; a crash after the rejects' commit leaves their position inside
    one; the retry routes that aggregate's events again, and the ones already routed are not written twice."""
    settings = fresh(prefix="tfkpl")
    records = user_records(0, 120)
    send_aggregated(settings, records, per_aggregate=7)
    ids = {record.event_id for record in records}
    even = {event_id for event_id in ids if int(event_id.removeprefix("ev-")) % 2 == 0}

    with pytest.raises(IngestError, match="SimulatedCrashError"):
        drain(spark, settings, transform=route_even_events, fault_hook=crash_at("between_commits", batch=1),
              batch_retries=0, max_records_per_shard=25)  # fmt: skip
    marks = spark.sql(f"SELECT summary['icestream.positions'] AS p FROM {settings.rejects_table_name}.snapshots")
    assert any(p.count(":") == 2 for row in marks.collect() for p in json.loads(row.p).values()), (
        "the rejects' position does not end inside an aggregate: the case is not exercised"
    )
    drain(spark, settings, transform=route_even_events, max_records_per_shard=25)

    events, reasons = state(spark, settings)
    assert set(events) == ids - even
    assert max(events.values()) == 1
    routed = Counter(
        json.loads(row.raw_text)["event_id"]
        for row in spark.table(settings.rejects_table_name).where("reason = 'even'").collect()
    )
    assert set(routed) == even
    assert max(routed.values()) == 1
    assert reasons == Counter({"even": len(even)})


def test_the_cli_names_the_transform(spark, fresh, monkeypatch) -> None:
    settings = fresh(shards=1, prefix="tf")
    sent, kept, blocked = records(0, 10)
    put(settings, sent)
    monkeypatch.setenv("ICESTREAM_STREAM_NAME", settings.stream_name)
    monkeypatch.setenv("ICESTREAM_TABLE", settings.table)
    transform = f"{__name__}:route_blocked_users"
    assert main(["ingest", "--available-now", "--trigger", "0s", "--quiet", "--transform", transform]) == 0
    events, reasons = state(spark, settings)
    assert set(events) == kept
    assert reasons == Counter({"blocked_user": len(blocked), "invalid_json": 1})
