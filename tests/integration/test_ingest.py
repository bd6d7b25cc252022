"""The ingest query end to end: emulator → Spark → Iceberg, exactly once through every kind of trouble."""

from __future__ import annotations

import base64
import itertools
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from icestream.config import load_settings, project_home
from icestream.errors import ConfigError, IngestError
from icestream.ingest.options import PHASES
from icestream.ingest.query import start_ingest
from icestream.kinesis.clients import kinesis_client, list_shards
from tests.helpers.crash import SimulatedCrashError, crash_at
from tests.helpers.ingest import assert_accounted, drain, table_state
from tests.helpers.samples import EXPECTED_REASON
from tests.helpers.streams import event_payload, mixed_records, put
from tests.helpers.waiting import wait_until

SAMPLES = project_home() / "data" / "samples"


@pytest.mark.parametrize("phase", PHASES)
def test_exactly_once_across_a_crash_at_each_phase(spark, fresh, tmp_path: Path, phase: str) -> None:
    settings = fresh()
    records, good, _ = mixed_records(0, 240)
    placed = put(settings, records)
    bad_positions = {
        place for place, (data, _) in zip(placed, records, strict=True) if data.startswith(b'{"event_id": "broken')
    }

    query = start_ingest(
        spark, settings, available_now=True, trigger_seconds=0, max_records_per_shard=60, batch_retries=0,
        fault_hook=crash_at(phase, batch=1), progress_file=tmp_path / "p.jsonl",
    )  # fmt: skip
    with pytest.raises(IngestError, match="SimulatedCrashError"):
        query.await_termination(timeout=300)

    more, more_good, _ = mixed_records(1000, 60)
    placed += put(settings, more)
    bad_positions |= {place for place, (data, _) in zip(placed[len(records) :], more, strict=True) if b"broken" in data}
    restarted = drain(spark, settings, max_records_per_shard=60, progress_file=tmp_path / "p.jsonl")

    events, rejects = table_state(spark, settings)
    assert set(events) == good | more_good, "nothing lost"
    assert max(events.values()) == 1, "nothing duplicated"
    assert set(rejects) == bad_positions
    assert max(rejects.values()) == 1
    assert_accounted(list(restarted.recent_progress))


def test_a_failed_batch_recovers_by_itself(spark, fresh) -> None:
    settings = fresh()
    records, good, _ = mixed_records(0, 150)
    put(settings, records)
    failures = {"left": 2}

    def flaky(phase: str, batch_id: int) -> None:
        if phase == "between_commits" and failures["left"]:
            failures["left"] -= 1
            raise SimulatedCrashError("transient")

    drain(spark, settings, max_records_per_shard=50, fault_hook=flaky, batch_retries=3)
    events, _ = table_state(spark, settings)
    assert set(events) == good
    assert max(events.values()) == 1


def test_malformed_samples_are_all_rejected_with_reasons(spark, fresh) -> None:
    settings = fresh(shards=1)
    malformed = [json.loads(line) for line in (SAMPLES / "malformed.jsonl").read_text().splitlines() if line]
    good = [line for line in (SAMPLES / "events.jsonl").read_bytes().splitlines() if line.strip()]
    records = [(line, json.loads(line)["user_id"]) for line in good]
    records += [(base64.b64decode(row["payload_base64"]), f"bad-{row['kind']}") for row in malformed]
    put(settings, records)
    query = drain(spark, settings)
    rejects = spark.table(settings.rejects_table_name).select("partition_key", "reason", "raw_data").collect()
    assert {row.partition_key[4:]: row.reason for row in rejects} == EXPECTED_REASON
    by_kind = {row["kind"]: base64.b64decode(row["payload_base64"]) for row in malformed}
    assert all(bytes(row.raw_data) == by_kind[row.partition_key[4:]] for row in rejects), "raw payload kept exactly"
    assert spark.table(settings.table_name).count() == len(good)
    totals = Counter()
    for batch in query.recent_progress:
        totals.update(batch["reject_reasons"])
    assert sum(totals.values()) == len(malformed)
    assert_accounted(list(query.recent_progress))


def test_a_field_in_both_places_is_rejected_and_times_cut_to_microseconds_are_counted(spark, fresh) -> None:
    """The top-level value and the property's: a reject with its payload, not one of them dropped. A time
    below a microsecond: the event stored cut, and the count travels from the read task to the progress."""
    settings = fresh(shards=1)
    second = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())

    def stamped(number: int, fraction: str, **fields: object) -> bytes:
        return json.dumps(
            {**json.loads(event_payload(number, "u0")), "event_ts": f"{second}{fraction}Z", **fields}
        ).encode()

    conflicting = stamped(9, "", page="/top", properties={"page": "/inner"})
    fractions = [".123456789", ".000000001", ".9999999", ".123456000", ".5"]  # the last two lose nothing
    events = [(stamped(number, fraction), "u0") for number, fraction in enumerate(fractions)]
    put(settings, [*events, (conflicting, "u0")])
    query = drain(spark, settings)
    (reject,) = spark.table(settings.rejects_table_name).select("reason", "detail", "raw_data").collect()
    assert (reject.reason, reject.detail) == (
        "conflicting_field",
        "field 'page' given both at top level and in properties",
    )
    assert bytes(reject.raw_data) == conflicting
    stored = {row.event_id: row.event_ts.microsecond for row in spark.table(settings.table_name).collect()}
    assert stored == {"ev-0": 123456, "ev-1": 0, "ev-2": 999999, "ev-3": 123456, "ev-4": 500000}
    assert sum(batch["event_times_cut"] for batch in query.recent_progress) == 3
    assert_accounted(list(query.recent_progress))


def test_dedupe_within_a_batch_and_against_committed_rows(spark, fresh) -> None:
    settings = fresh()
    first = [(event_payload(i, f"u{i % 5}"), f"u{i % 5}") for i in range(100)]
    cross_shard = [(event_payload(0, "someone-else"), "someone-else")]  # same event_id, other key
    put(settings, first + cross_shard)
    drain(spark, settings)
    put(settings, first[:40] + [(event_payload(i, "u1"), "u1") for i in range(100, 130)])  # producer retries
    second = drain(spark, settings)
    events, _ = table_state(spark, settings)
    assert len(events) == 130
    assert max(events.values()) == 1
    assert sum(batch["deduplicated"] for batch in second.recent_progress) == 40


def test_dedupe_can_be_switched_off(spark, fresh) -> None:
    settings = fresh(shards=1)
    records = [(event_payload(i, "u1"), "u1") for i in range(20)]
    put(settings, records + records[:5])
    drain(spark, settings, dedupe=False)
    events, _ = table_state(spark, settings)
    assert sum(events.values()) == 25


def test_available_now_drains_in_several_batches_and_stops(spark, fresh) -> None:
    settings = fresh()
    put(settings, [(event_payload(i, f"u{i % 9}"), f"u{i % 9}") for i in range(500)])
    query = drain(spark, settings, max_records_per_shard=100, prefetch=True)
    assert not query.is_active
    assert query.status["message"] == "Stopped"
    assert len(query.recent_progress) >= 3
    assert spark.table(settings.table_name).count() == 500
    # Capped batches mean a backlog: the next batch's read ran while the previous one committed.
    assert any(batch["prefetched"] for batch in query.recent_progress)
    last = query.last_progress
    assert last["caught_up"] is True
    assert last["events_snapshot_id"] is not None
    assert set(last["shards"]) == {
        shard["ShardId"] for shard in list_shards(kinesis_client(settings), settings.stream_name)
    }
    lines = [json.loads(line) for line in query.progress_file.read_text().splitlines()]
    assert [line["batch_id"] for line in lines if line["id"] == query.id] == [
        p["batch_id"] for p in query.recent_progress
    ]


@pytest.mark.parametrize("prefetch", [False, True])
def test_the_default_batch_takes_a_backlog_of_ten_getrecords_answers_at_once(spark, fresh, prefetch: bool) -> None:
    """25,000 records waiting in one shard: one batch (three GetRecords calls), not a batch per answer."""
    settings = fresh(shards=1)
    put(settings, [(event_payload(i, f"u{i % 9}"), f"u{i % 9}") for i in range(25_000)])
    query = drain(spark, settings, prefetch=prefetch)
    batches = [batch["shards"] for batch in query.recent_progress]
    assert [sum(shard["read"] for shard in shards.values()) for shards in batches] == [25_000]
    assert [sum(shard["calls"] for shard in shards.values()) for shards in batches] == [3]
    assert spark.table(settings.table_name).count() == 25_000


@pytest.mark.parametrize("fails", [False, True])
def test_a_batch_frees_the_rows_it_kept_whether_it_commits_or_fails(spark, fresh, kept_blocks, fails: bool) -> None:
    """The read's rows live in the block store (localCheckpoint), which ``unpersist`` does not reach."""
    settings = fresh(shards=2)
    put(settings, [(event_payload(i, f"u{i % 5}"), f"u{i % 5}") for i in range(300)])
    before = kept_blocks()

    crash = crash_at("between_commits") if fails else None
    query = start_ingest(spark, settings, available_now=True, trigger_seconds=0, batch_retries=0, fault_hook=crash)
    if fails:
        with pytest.raises(IngestError, match="SimulatedCrashError"):
            query.await_termination(timeout=300)
    else:
        assert query.await_termination(timeout=300)
        assert spark.table(settings.table_name).count() == 300
    assert kept_blocks() <= before, "a batch's rows stayed in the block store"


def test_resharding_keeps_order_per_key_and_exactly_once(spark, fresh) -> None:
    settings = fresh(shards=2)
    client = kinesis_client(settings)
    counters: Counter = Counter()

    def send(count: int, first: int) -> None:
        records = []
        for number in range(first, first + count):
            user = f"user-{number % 17}"
            counters[user] += 1
            records.append((event_payload(number, user, counter=counters[user]), user))
        put(settings, records)

    send(300, 0)
    query = start_ingest(spark, settings, trigger_seconds=0.5, max_records_per_shard=40)
    shard = list_shards(client, settings.stream_name)[0]
    low, high = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
    client.split_shard(
        StreamName=settings.stream_name, ShardToSplit=shard["ShardId"], NewStartingHashKey=str((low + high) // 2)
    )
    send(300, 300)
    children = [s for s in list_shards(client, settings.stream_name) if s.get("ParentShardId") == shard["ShardId"]]
    first, second = sorted(children, key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
    client.merge_shards(
        StreamName=settings.stream_name, ShardToMerge=first["ShardId"], AdjacentShardToMerge=second["ShardId"]
    )
    send(300, 600)

    def all_written() -> bool:
        assert query.exception() is None, query.exception()
        return spark.table(settings.table_name).count() >= 900

    wait_until(all_written, timeout=240, interval=1, message="the 900 events sent in the table")
    query.stop()
    assert query.await_termination(timeout=60)

    events, _ = table_state(spark, settings)
    assert len(events) == 900
    assert max(events.values()) == 1
    rows = (
        spark.table(settings.table_name)
        .select("user_id", "properties", "ingest_ts", "shard_id", "sequence_number")
        .collect()
    )
    by_user: dict[str, list] = {}
    for row in rows:
        by_user.setdefault(row.user_id, []).append(
            (int(row.properties["n"]), row.ingest_ts, row.shard_id, int(row.sequence_number))
        )
    for user, items in by_user.items():
        items.sort()
        for earlier, later in itertools.pairwise(items):
            # A later event of a key is never written in an earlier batch, and within one batch
            # it comes from the same shard, further on.
            assert earlier[1] <= later[1], (user, earlier, later)
            if earlier[1] == later[1]:
                assert earlier[2] == later[2], (user, earlier, later)
                assert earlier[3] < later[3], (user, earlier, later)
    assert len({row.shard_id for row in rows}) >= 4, "parents, children and the merged shard were all read"


def test_latest_skips_what_was_there_before(spark, fresh) -> None:
    settings = fresh(shards=1)
    put(settings, [(event_payload(i, "u1"), "u1") for i in range(20)])
    phases: list[str] = []
    query = start_ingest(spark, settings, trigger_seconds=0.3, starting_position="latest",
                         fault_hook=lambda phase, _: phases.append(phase))  # fmt: skip

    def read_at_latest() -> bool:
        assert query.is_active, query.exception()
        # The first trigger read the stream and is over (a caught-up query then only asks Kinesis).
        return phases.count("before_read") >= 1 and query.status["message"] == "Waiting for next trigger"

    def all_written() -> bool:
        assert query.is_active, query.exception()
        return spark.table(settings.table_name).count() >= 30

    # Send the newer records once the query has read the stream at LATEST and found nothing new:
    # the earlier records are behind the position it stands for, the newer ones after it.
    wait_until(read_at_latest, timeout=60, interval=0.05, message="the query's first trigger at LATEST to end")
    put(settings, [(event_payload(i, "u1"), "u1") for i in range(100, 130)])
    wait_until(all_written, timeout=60, interval=0.5, message="the 30 records sent after the start in the table")
    query.stop()
    events, _ = table_state(spark, settings)
    assert set(events) == {f"ev-{i}" for i in range(100, 130)}


def test_transform_runs_on_each_batch(spark, fresh) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    settings = fresh(shards=1)
    put(settings, [(event_payload(i, "u1"), "u1") for i in range(10)])

    def enrich(frame):
        return frame.withColumn("properties", F.map_concat("properties", F.create_map(F.lit("enriched"), F.lit("yes"))))

    drain(spark, settings, transform=enrich)
    values = {row.properties["enriched"] for row in spark.table(settings.table_name).collect()}
    assert values == {"yes"}

    put(settings, [(event_payload(50, "u1"), "u1")])
    with pytest.raises(ConfigError, match="dropped device_info"):
        drain(spark, settings, transform=lambda frame: frame.drop("device_info"), batch_retries=0)


def test_a_read_task_that_gives_up_is_retried_as_a_whole_batch(spark, fresh, emulator: str) -> None:
    """A ShardReadError inside a Spark task reaches the driver as Spark's error text: still transient."""
    from tests.reliability.faultproxy import FaultProxy

    settings = fresh(shards=1)
    put(settings, [(event_payload(i, "u1"), "u1") for i in range(5)])
    phases: list[str] = []
    # One 5xx answer to GetRecords, and a task that gives up at its first failure.
    with FaultProxy(emulator, "server_error", every=1, budget=1, operations=("GetRecords",)) as proxy:
        via_proxy = load_settings(kinesis_endpoint=proxy.endpoint, stream_name=settings.stream_name,
                                  table=settings.table)  # fmt: skip
        drain(spark, via_proxy, batch_retries=1, fault_hook=lambda phase, _: phases.append(phase),
              read_options={"max_attempts": 1})  # fmt: skip
    assert sum(proxy.injected.values()) == 1
    assert phases.count("before_read") == 2, "the batch ran again after its read task gave up"
    assert set(table_state(spark, settings)[0]) == {f"ev-{i}" for i in range(5)}


def test_an_error_a_retry_cannot_fix_stops_the_query_at_once(spark, fresh) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    settings = fresh(shards=1)
    put(settings, [(event_payload(i, "u1"), "u1") for i in range(5)])
    phases: list[str] = []
    with pytest.raises(IngestError, match=r"AnalysisException.*not retried"):
        drain(spark, settings, batch_retries=3, fault_hook=lambda phase, _: phases.append(phase),
              transform=lambda frame: frame.withColumn("user_id", F.col("no_such_column")))  # fmt: skip
    assert phases.count("before_read") == 1
    assert spark.table(settings.table_name).count() == 0


def test_graceful_stop_while_waiting_for_data(spark, fresh) -> None:
    settings = fresh(shards=1)
    query = start_ingest(spark, settings, trigger_seconds=1)

    def waiting() -> bool:
        assert query.is_active, query.exception()
        return query.status["message"] == "Waiting for next trigger"  # a trigger found nothing; the next is due

    # An empty trigger takes a fraction of the 1 s trigger interval, so the query waits most of the time.
    wait_until(waiting, timeout=60, interval=0.02, message="the query to wait for its next trigger")
    assert query.is_active
    query.stop()
    assert query.await_termination(timeout=30)
    assert query.status["message"] == "Stopped"


def test_position_survives_compaction_and_snapshot_expiry(spark, fresh) -> None:
    settings = fresh()
    records, good, _ = mixed_records(0, 200)
    put(settings, records)
    drain(spark, settings, max_records_per_shard=50)
    for table in (settings.table_name, settings.rejects_table_name):
        name = table.split(".", 1)[1]
        spark.sql(f"CALL lake.system.rewrite_data_files(table => '{name}', options => map('rewrite-all', 'true'))")
        # Procedure arguments are literals: a moment after every snapshot so far.
        cutoff = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() + 1))
        expire = f"table => '{name}', older_than => TIMESTAMP '{cutoff}', retain_last => 1"
        spark.sql(f"CALL lake.system.expire_snapshots({expire})")
        assert spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0] == 1

    restarted = drain(spark, settings, max_records_per_shard=50)
    assert restarted.recovered_from == {"events": "data", "rejects": "data"}
    events, rejects = table_state(spark, settings)
    assert set(events) == good
    assert max(events.values()) == 1
    assert max(rejects.values()) == 1

    more, more_good, _ = mixed_records(5000, 50)
    put(settings, more)
    drain(spark, settings)
    events, rejects = table_state(spark, settings)
    assert set(events) == good | more_good
    assert max(events.values()) == 1
    assert max(rejects.values()) == 1


def test_a_column_added_while_streaming_is_filled_from_the_new_field(spark, fresh) -> None:
    settings = fresh(shards=1)
    put(settings, [(event_payload(i, "u1"), "u1") for i in range(5)])
    drain(spark, settings)
    before = spark.sql(f"SELECT snapshot_id FROM {settings.table_name}.snapshots ORDER BY committed_at DESC").first()[0]
    files_before = {row.file_path for row in spark.sql(f"SELECT file_path FROM {settings.table_name}.files").collect()}

    spark.sql(f"ALTER TABLE {settings.table_name} ADD COLUMNS (coupon STRING, basket_items INT)")
    newer = [json.loads(event_payload(i, "u1")) | {"coupon": f"SAVE{i}", "basket_items": str(i)} for i in range(10, 13)]
    put(settings, [(json.dumps(document).encode(), "u1") for document in newer])
    drain(spark, settings)

    rows = {row.event_id: row for row in spark.table(settings.table_name).collect()}
    assert rows["ev-11"].coupon == "SAVE11"
    assert rows["ev-12"].basket_items == 12
    assert rows["ev-0"].coupon is None, "old rows read the new column as null"
    assert "coupon" not in spark.sql(f"SELECT * FROM {settings.table_name} VERSION AS OF {before}").columns
    files_after = {row.file_path for row in spark.sql(f"SELECT file_path FROM {settings.table_name}.files").collect()}
    assert files_before <= files_after, "adding a column rewrote no data file"


def test_a_running_query_writes_a_column_added_while_it_runs(spark, fresh) -> None:
    # The sink keeps the table's columns between batches and converts them again only when the
    # table's schema id changes: the batch after an ALTER TABLE must write the new column.
    settings = fresh(shards=1)
    query = start_ingest(spark, settings, trigger_seconds=0.2)
    try:
        put(settings, [(event_payload(i, "u1"), "u1") for i in range(5)])
        wait_until(lambda: spark.table(settings.table_name).count() == 5, 120, 0.5, "the first 5 events")
        spark.sql(f"ALTER TABLE {settings.table_name} ADD COLUMNS (coupon STRING)")
        newer = [json.loads(event_payload(i, "u1")) | {"coupon": f"SAVE{i}"} for i in range(5, 8)]
        put(settings, [(json.dumps(document).encode(), "u1") for document in newer])
        wait_until(lambda: spark.table(settings.table_name).count() == 8, 120, 0.5, "the 3 events after the ALTER")
        assert query.is_active
    finally:
        query.stop()
    query.await_termination()
    coupons = {row.event_id: row.coupon for row in spark.table(settings.table_name).collect()}
    assert coupons["ev-6"] == "SAVE6"
    assert coupons["ev-0"] is None


def test_at_timestamp_starts_at_the_first_record_that_arrived_then(spark, fresh) -> None:
    from datetime import UTC, datetime

    settings = fresh(shards=1)
    put(settings, [(event_payload(i, "u1"), "u1") for i in range(20)])
    # The gaps are what is tested, not a wait for anything: arrival times are kept to the
    # millisecond, so the cut must fall clearly between the two sends.
    time.sleep(1.5)
    cut = datetime.now(UTC)
    time.sleep(0.5)
    put(settings, [(event_payload(i, "u1"), "u1") for i in range(100, 110)])
    drain(spark, settings, starting_position="at_timestamp", starting_timestamp=cut)
    events, _ = table_state(spark, settings)
    assert set(events) == {f"ev-{i}" for i in range(100, 110)}


def test_the_dedupe_index_follows_the_table_while_the_query_runs(spark, fresh) -> None:
    """One running query's index of committed ids: kept through compaction, rebuilt after another
    writer's append, and read from the table again for a late retry older than what it holds."""
    settings = fresh(shards=1)
    now = time.time()

    def event(event_id: str, at: float) -> tuple[bytes, str]:
        document = json.loads(event_payload(0, "u1", event_id))
        document["event_ts"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
        return json.dumps(document).encode(), "u1"

    query = start_ingest(spark, settings, trigger_seconds=0.2)

    def settle(batches: int) -> dict[str, Any]:
        def taken() -> bool:
            assert query.is_active, query.exception()
            return len(query.recent_progress) >= batches

        wait_until(taken, timeout=120, message=f"batch {batches} to take the records")
        return query.recent_progress[-1]["dedupe_index"]

    try:
        put(settings, [event(f"ev-{i}", now) for i in range(5)] + [event("late", now - 5 * 3600)])
        first = settle(1)
        assert first["loads"] == 1
        assert first["ids"] == 5, "the 5-hour-old event is already two lookbacks behind: evicted"

        name = settings.table_name.split(".", 1)[1]
        spark.sql(f"CALL lake.system.rewrite_data_files(table => '{name}', options => map('rewrite-all', 'true'))")
        put(settings, [event("ev-5", now)])
        assert settle(2)["loads"] == 1, "a compaction keeps the rows: no reason to read the table"

        from pyspark.sql import functions as F  # noqa: N812

        outside = spark.table(settings.table_name).where("event_id = 'ev-0'").withColumn("event_id", F.lit("ev-ext"))
        outside.writeTo(settings.table_name).append()
        put(settings, [event("ev-ext", now)])  # the same event, now also sent through the stream
        assert settle(3)["loads"] == 2, "another writer's append makes the index start again"

        put(settings, [event("late", now - 5 * 3600)])  # a retry of the late event
        assert settle(4)["loads"] == 3, "older than the index holds: read that range from the table"
    finally:
        query.stop()
    events, _ = table_state(spark, settings)
    assert set(events) == {f"ev-{i}" for i in range(6)} | {"ev-ext", "late"}
    assert max(events.values()) == 1
    assert [batch["deduplicated"] for batch in query.recent_progress] == [0, 0, 1, 1]


def test_freshness_is_measured_for_every_written_row(spark, fresh) -> None:
    from icestream.queries.report import freshness

    settings = fresh()
    put(settings, [(event_payload(i, f"u{i % 3}"), f"u{i % 3}") for i in range(60)])
    query = drain(spark, settings, max_records_per_shard=20)
    progress = list(query.recent_progress)
    measured = freshness(spark, settings, progress)
    assert len(measured) == sum(batch["written"] for batch in progress) == 60
    assert set(measured["batch_id"]) == {batch["batch_id"] for batch in progress if batch["written"]}
    assert (measured["freshness_s"] >= 0).all(), "a row is visible only after it arrived"


def test_a_second_ingest_on_the_same_table_is_refused_while_the_first_runs(spark, fresh) -> None:
    settings = fresh(shards=1)
    put(settings, [(event_payload(i, "u1"), "u1") for i in range(20)])
    first = start_ingest(spark, settings, trigger_seconds=0.5)
    try:
        with pytest.raises(IngestError, match=r"already being ingested \(.*pid"):
            start_ingest(spark, settings, available_now=True)
        assert first.is_active, "the refusal leaves the running ingest alone"
    finally:
        first.stop(timeout=60)
    second = start_ingest(spark, settings, available_now=True)  # free once the first stopped
    assert second.await_termination(timeout=120)
    events, _ = table_state(spark, settings)
    assert sum(events.values()) == 20


def test_a_graceful_stop_leaves_every_table_at_the_querys_position(spark, fresh) -> None:
    """A clean stream gives the rejects table no rows: it commits its position with the first batch
    only (then every position_commit_seconds). Without the commit at stop, the next run would start
    from that older position and read the later records again."""
    settings = fresh(shards=2, prefix="stoppos")
    put(settings, [(event_payload(n, f"u{n % 3}"), f"u{n % 3}") for n in range(30)])
    first = drain(spark, settings, max_records_per_shard=5)
    assert len(first.recent_progress) > 1, "several batches: the case is exercised"
    latest = {}
    for table in (settings.table_name, settings.rejects_table_name):
        spark.catalog.refreshTable(table)
        latest[table] = (
            spark.sql(
                f"SELECT summary['icestream.positions'] AS p FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1"
            )
            .first()
            .p
        )
    assert latest[settings.rejects_table_name] == latest[settings.table_name]
    again = drain(spark, settings, max_records_per_shard=5)
    assert [batch["num_input_rows"] for batch in again.recent_progress] == [], "nothing read twice"
