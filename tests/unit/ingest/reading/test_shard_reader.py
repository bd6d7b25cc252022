"""The shard reader against a fake Kinesis: limits, throttling, expired iterators, errors, replay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from icestream.errors import ShardReadError
from icestream.ingest.positions import TRIM_HORIZON, after
from icestream.ingest.reading.record_rows import ROW_FIELDS
from icestream.ingest.reading.shard_plan import ShardPlan
from icestream.ingest.reading.shard_reader import read_shard
from icestream.kinesis.kpl import encode_aggregate
from tests.helpers.fake_kinesis import FakeKinesis, options, payload, read_fake_shard


def client_error(code: str, status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetRecords"
    )


def test_reads_everything_then_stops_when_caught_up() -> None:
    fake = FakeKinesis([payload(i) for i in range(25)])
    rows, meta, _ = read_fake_shard(fake)
    assert [row["event_id"] for row in rows] == [f"e{i}" for i in range(25)]
    assert (meta["read"], meta["good"], meta["last_sequence"], meta["finished"]) == (25, 25, "1024", False)
    assert meta["millis_behind"] == 0


def test_stops_at_the_cap_and_asks_no_more_than_it_may() -> None:
    fake = FakeKinesis([payload(i) for i in range(50)])
    rows, meta, _ = read_fake_shard(fake, max_records=20)
    assert len(rows) == meta["read"] == 20
    assert all(arguments["Limit"] <= 20 for name, arguments in fake.calls if name == "get_records")


def test_calls_are_paced_within_the_per_shard_limit() -> None:
    fake = _paged(FakeKinesis([payload(i) for i in range(30)]), 10)  # pages of 10: several calls
    rows, meta, pauses = read_fake_shard(fake, max_records=30, min_call_interval=0.2)
    calls = sum(1 for name, _ in fake.calls if name == "get_records")
    assert calls >= 3
    # Every GetRecords after the first waited for the rest of its 0.2 s slot (at most 5 calls/s per
    # shard); GetShardIterator has a limit of its own, so the first GetRecords need not wait for it.
    assert len(pauses) == calls - 1
    assert all(0 < pause <= 0.2 for pause in pauses)
    assert len(rows) == meta["read"] == 30


def _paged(fake: FakeKinesis, page: int) -> FakeKinesis:
    original = fake.get_records
    fake.get_records = lambda ShardIterator, Limit: original(ShardIterator, min(Limit, page))  # type: ignore[method-assign]  # noqa: N803
    return fake


def test_throttling_is_retried_with_growing_jittered_backoff() -> None:
    fake = FakeKinesis([payload(i) for i in range(10)])
    fake.faults = [client_error("ProvisionedThroughputExceededException")] * 3
    rows, meta, pauses = read_fake_shard(fake, min_call_interval=0.0)
    assert len(rows) == 10
    assert (meta["throttled"], meta["retried"]) == (3, 3)
    backoffs = [pause for pause in pauses if pause > 0]
    assert len(backoffs) == 3
    assert backoffs[0] < backoffs[-1]


def test_expired_iterator_is_renewed_after_the_last_record_read() -> None:
    fake = FakeKinesis([payload(i) for i in range(30)])
    _paged(fake, 10)
    original = fake.get_records
    state = {"calls": 0}

    def expire_second_call(ShardIterator: str, Limit: int) -> dict:  # noqa: N803
        state["calls"] += 1
        if state["calls"] == 2:
            raise client_error("ExpiredIteratorException")
        return original(ShardIterator, Limit)

    fake.get_records = expire_second_call  # type: ignore[method-assign]
    rows, meta, _ = read_fake_shard(fake, min_call_interval=0.0)
    assert [row["event_id"] for row in rows] == [f"e{i}" for i in range(30)], "nothing lost, nothing twice"
    assert meta["iterator_renewals"] == 1
    renewal = [arguments for name, arguments in fake.calls if name == "get_shard_iterator"][1]
    assert renewal == {"StreamName": "s", "ShardId": "shardId-0", "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                       "StartingSequenceNumber": "1009"}  # fmt: skip


@pytest.mark.parametrize(
    "fault",
    [
        EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
        client_error("InternalFailure", 500),
        client_error("ServiceUnavailable", 503),
        ConnectionResetError("reset"),
    ],
    ids=["connection", "internal-failure", "unavailable", "reset"],
)
def test_transient_errors_are_retried(fault: Exception) -> None:
    fake = FakeKinesis([payload(i) for i in range(5)])
    fake.faults = [fault, fault]
    rows, meta, _ = read_fake_shard(fake, min_call_interval=0.0)
    assert len(rows) == 5
    assert meta["retried"] == 2


def test_persistent_failure_gives_up_with_a_clear_error() -> None:
    fake = FakeKinesis([payload(1)])
    fake.faults = [client_error("InternalFailure", 500)] * 10
    with pytest.raises(ShardReadError, match="shardId-0: 4 failures in a row"):
        read_fake_shard(fake, min_call_interval=0.0, max_attempts=4)


def test_non_transient_errors_are_not_retried() -> None:
    fake = FakeKinesis([payload(1)])
    fake.faults = [client_error("ResourceNotFoundException")]
    with pytest.raises(ClientError, match="ResourceNotFound"):
        read_fake_shard(fake, min_call_interval=0.0)


def test_closed_shard_is_read_to_its_end() -> None:
    fake = FakeKinesis([payload(i) for i in range(3)], closed=True)
    rows, meta, _ = read_fake_shard(fake, min_call_interval=0.0)
    assert len(rows) == 3
    assert meta["finished"] is True


def test_records_already_committed_are_skipped_per_table() -> None:
    fake = FakeKinesis([payload(0), b"not json", payload(2), b"", payload(4)])
    plan = ShardPlan("shardId-0", TRIM_HORIZON, False, events_committed="1002", rejects_committed="1001")
    rows, meta, _ = read_fake_shard(fake, plan, min_call_interval=0.0)
    assert [(row["kind"], row["sequence_number"]) for row in rows] == [("reject", "1003"), ("event", "1004")]
    assert (meta["replayed_events"], meta["replayed_rejects"]) == (2, 1)
    assert meta["read"] == 5


def test_duplicates_within_a_shard_keep_the_first() -> None:
    fake = FakeKinesis([payload(0), payload(1), payload(9, event_id="e0"), payload(2)])
    rows, meta, _ = read_fake_shard(fake, min_call_interval=0.0)
    assert [row["sequence_number"] for row in rows] == ["1000", "1001", "1003"]
    assert meta["deduplicated"] == 1
    rows, meta, _ = read_fake_shard(
        FakeKinesis([payload(0), payload(9, event_id="e0")]), min_call_interval=0.0, dedupe=False
    )
    assert len(rows) == 2
    assert meta["deduplicated"] == 0


def test_events_whose_time_was_cut_to_microseconds_are_counted_once_each() -> None:
    def stamped(number: int, stamp: str, event_id: str | None = None) -> bytes:
        return json.dumps({**json.loads(payload(number, event_id)), "event_ts": stamp}).encode()

    fake = FakeKinesis(
        [
            stamped(0, "2026-11-21T05:00:00.123456789Z"),
            stamped(1, "2026-11-21T05:00:00.123456Z"),
            stamped(2, "2026-11-21T05:00:00.000000001Z"),
            stamped(9, "2026-11-21T05:00:00.123456789Z", event_id="e0"),  # a repeat: not written, not counted
            stamped(3, "2026-11-21T05:00:00.1234560Z"),  # a zero past the sixth digit: nothing lost
        ]
    )
    rows, meta, _ = read_fake_shard(fake, min_call_interval=0.0)
    assert [row["event_ts"].microsecond for row in rows] == [123456, 123456, 0, 123456]
    assert meta["event_times_cut"] == 2


def test_reject_rows_keep_the_raw_payload_and_kinesis_metadata() -> None:
    raw = b"\xff\xfe{broken"
    rows, meta, _ = read_fake_shard(FakeKinesis([raw]), min_call_interval=0.0)
    (row,) = rows
    assert row["raw_data"] == raw
    assert row["reason"] == "non_utf8"
    assert (row["shard_id"], row["sequence_number"], row["partition_key"]) == ("shardId-0", "1000", "u1")
    assert meta["reasons"] == {"non_utf8": 1}


def test_restart_position_after_a_record() -> None:
    fake = FakeKinesis([payload(i) for i in range(5)])
    rows, meta, _ = read_fake_shard(
        fake, ShardPlan("shardId-0", after("1002"), False, None, None), min_call_interval=0.0
    )
    assert [row["event_id"] for row in rows] == ["e3", "e4"]
    assert meta["read"] == 2


def test_an_iterator_from_the_previous_batch_is_used_and_handed_on() -> None:
    fake = FakeKinesis([payload(i) for i in range(6)])
    _, first, _ = read_fake_shard(fake, max_records=4, min_call_interval=0.0)
    assert first["next_iterator"] == "4"
    plan = ShardPlan("shardId-0", after(first["last_sequence"]), False, None, None, iterator=first["next_iterator"])
    rows, second, _ = read_fake_shard(fake, plan, min_call_interval=0.0)
    assert second["last_sequence"] == "1005"
    assert [row["event_id"] for row in rows] == ["e4", "e5"]
    assert sum(1 for name, _ in fake.calls if name == "get_shard_iterator") == 1, "no new iterator was needed"


def test_rows_become_arrow_batches_with_spark_types() -> None:
    from icestream.ingest.reading.record_rows import arrow_schema, record_batch

    fake = FakeKinesis([payload(0), b"\xff", payload(2)])
    plan = ShardPlan("shardId-0", TRIM_HORIZON, False, None, None)
    rows = list(read_shard(plan, options(min_call_interval=0.0), fake))
    batch = record_batch(rows, arrow_schema())
    assert batch.num_rows == 4
    assert batch.column("kind").to_pylist() == ["event", "reject", "event", "meta"]
    assert batch.column("raw_data").to_pylist()[1] == b"\xff"
    assert batch.column("event_ts").to_pylist()[0] == datetime(2026, 11, 21, 5, 0, tzinfo=UTC)


def test_null_and_empty_nested_values_keep_their_meaning_in_arrow() -> None:
    from icestream.ingest.reading.record_rows import arrow_schema, record_batch

    device = {"device_type": "tv", "os": None, "app_version": "1"}
    fake = FakeKinesis([
        json.dumps({**json.loads(payload(0)), "properties": {"a": "1", "b": None}, "device_info": device}).encode(),
        json.dumps({**json.loads(payload(1)), "properties": {}}).encode(),
    ])  # fmt: skip
    rows = list(read_shard(ShardPlan("shardId-0", TRIM_HORIZON, False, None, None), options(), fake, lambda _: None))
    batch = record_batch(rows, arrow_schema(), batch_id=7)
    assert batch.column("device_info").to_pylist() == [device, None, None]
    assert batch.column("properties").to_pylist() == [[("a", "1")], [], None]
    assert batch.column("reason").null_count == 3, "a column no row fills is all null"
    assert batch.column("batch_id").to_pylist() == [7, 7, 7]


def test_the_arrival_range_covers_only_the_records_taken_before_the_cap() -> None:
    fake = FakeKinesis([payload(i) for i in range(8)])
    _, stats, _ = read_fake_shard(fake, max_records=3, min_call_interval=0.0)
    assert (stats["first_arrival"], stats["last_arrival"]) == (
        datetime(2026, 11, 21, 5, 0, 0, tzinfo=UTC).timestamp(),
        datetime(2026, 11, 21, 5, 0, 2, tzinfo=UTC).timestamp(),
    )


def _read_at(fake: FakeKinesis, now: float, plan: ShardPlan | None = None) -> dict:
    plan = plan or ShardPlan("shardId-0", TRIM_HORIZON, False, None, None)
    rows = list(read_shard(plan, options(min_call_interval=0.0), fake, lambda _: None, now=lambda: now))
    return json.loads(rows[-1][ROW_FIELDS.index("meta")])


def test_the_lag_before_the_read_is_the_newest_arrival_minus_the_oldest_uncommitted() -> None:
    # Records arrived 05:00:00 to 05:00:04, then the stream went idle; the read began at 05:01:30.
    # The lag (docs/glossary.md) is 4 s: the 86 s of idle stream after the newest record are no lag.
    fake = FakeKinesis([payload(i) for i in range(5)])
    began = datetime(2026, 11, 21, 5, 1, 30, tzinfo=UTC).timestamp()
    stats = _read_at(fake, began)
    assert stats["millis_behind"] == 0
    assert stats["behind_before_ms"] == 4_000


def test_a_read_cut_at_the_cap_counts_what_it_left_behind_in_the_lag() -> None:
    # 3 of 8 records taken (05:00:00 to 05:00:02); MillisBehindLatest says the tip is 5 s past the last.
    fake = FakeKinesis([payload(i) for i in range(8)])
    rows = read_shard(
        ShardPlan("shardId-0", TRIM_HORIZON, False, None, None),
        options(min_call_interval=0.0, max_records=3),
        fake,
        lambda _: None,
        now=lambda: datetime(2026, 11, 21, 5, 1, 30, tzinfo=UTC).timestamp(),
    )
    stats = json.loads(list(rows)[-1][ROW_FIELDS.index("meta")])
    assert stats["behind_before_ms"] == 2_000 + 5_000


def test_the_lag_before_a_read_never_counts_records_that_arrived_during_it() -> None:
    fake = FakeKinesis([payload(i) for i in range(5)])
    began = datetime(2026, 11, 21, 5, 0, 1, tzinfo=UTC).timestamp()  # records 2 to 4 came while it read
    assert _read_at(fake, began)["behind_before_ms"] == 1_000


def test_a_read_that_finds_nothing_new_began_at_the_tip() -> None:
    fake = FakeKinesis([payload(i) for i in range(2)])
    stats = _read_at(fake, 1e10, ShardPlan("shardId-0", after("1001"), False, None, None))
    assert stats["read"] == 0
    assert stats["behind_before_ms"] == 0


def test_a_shard_stopped_by_its_cap_says_so_and_one_read_to_its_tip_does_not() -> None:
    _, capped, _ = read_fake_shard(FakeKinesis([payload(i) for i in range(50)]), max_records=20)
    _, whole, _ = read_fake_shard(FakeKinesis([payload(i) for i in range(15)]), max_records=20)
    _, full, _ = read_fake_shard(FakeKinesis([payload(i) for i in range(20)]), max_records=20)
    assert (capped["read"], capped["capped"]) == (20, True)
    assert (whole["read"], whole["capped"], whole["millis_behind"]) == (15, False, 0)
    # An answer as full as asked may have left records behind, whatever MillisBehindLatest (a time) says.
    assert (full["read"], full["capped"], full["millis_behind"]) == (20, True, 0)


def _pooled(fakes: dict[str, FakeKinesis], share: int, threads: int | None = None) -> dict[str, dict]:
    """Read ``fakes`` as one task's shards, side by side, each with a share of ``share`` records, pooled."""
    from icestream.ingest.reading.threads import RecordBudget, side_by_side

    threads = threads or len(fakes)
    budget = RecordBudget(len(fakes) if threads >= len(fakes) else 0)  # as read_task.read_arrow makes it
    read = options(max_records=share, pooled_cap=1000, min_call_interval=0.0)
    metas = {}

    def one(shard_id: str, fake: FakeKinesis) -> Iterator[dict]:
        plan = ShardPlan(shard_id, TRIM_HORIZON, False, None, None)
        rows = [dict(zip(ROW_FIELDS, row, strict=True)) for row in read_shard(plan, read, fake, budget=budget)]
        metas[shard_id] = json.loads(rows[-1]["meta"]) | {"rows": len(rows) - 1}
        return iter(())

    list(side_by_side([partial(one, shard_id, fake) for shard_id, fake in fakes.items()], threads=threads))
    return dict(sorted(metas.items()))


def test_a_tasks_shards_share_their_records() -> None:
    # 30 and 5 records, a share of 20 each: the big shard takes what the small one left, in one batch.
    metas = _pooled({"shardId-1": FakeKinesis([payload(i) for i in range(30)]),
                     "shardId-2": FakeKinesis([payload(i) for i in range(5)])}, share=20)  # fmt: skip
    assert [(meta["read"], meta["rows"], meta["capped"]) for meta in metas.values()] == [(30, 30, False), (5, 5, False)]


def test_shared_records_never_exceed_the_tasks_bound_nor_starve_a_shard() -> None:
    # Three shards of 30, a share of 20 each: each reads its own 20 first, none has any to spare.
    metas = _pooled({f"shardId-{n}": FakeKinesis([payload(i) for i in range(30)]) for n in range(3)}, share=20)
    assert [(meta["read"], meta["capped"]) for meta in metas.values()] == [(20, True)] * 3


def test_shards_waiting_for_records_never_hold_up_those_waiting_for_a_thread() -> None:
    # Six shards on two threads: a shard past its share waits only for shards already reading, so the
    # queued ones still get a thread; every shard reads at least its share, the task at most six shares.
    sizes = [30, 2, 30, 2, 30, 2]
    fakes = {f"shardId-{n}": FakeKinesis([payload(i) for i in range(size)]) for n, size in enumerate(sizes)}
    metas = _pooled(fakes, share=10, threads=2)
    reads = [meta["read"] for meta in metas.values()]
    assert all(read >= min(size, 10) for read, size in zip(reads, sizes, strict=True))
    assert sum(reads) <= 60


def test_a_chunk_becomes_arrow_without_comparing_its_values_with_none() -> None:
    from icestream.ingest.reading.record_rows import arrow_schema, record_batch

    compared = []

    class Text(str):
        def __eq__(self, other: object) -> bool:
            compared.append(other)
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    rows = list(read_shard(ShardPlan("shardId-0", TRIM_HORIZON, False, None, None), options(), FakeKinesis([
        payload(0), payload(1)]), lambda _: None))  # fmt: skip
    rows = [tuple(Text(value) if type(value) is str else value for value in row) for row in rows]
    batch = record_batch(rows, arrow_schema())
    assert batch.column("event_id").to_pylist() == ["e0", "e1", None]
    assert compared == [], "only the first and last values of a column are looked at, by identity"


def _aggregates(count: int, size: int) -> list[bytes]:
    """``count`` KPL aggregates of ``size`` user records each, events e0, e1, ... in order."""
    return [
        encode_aggregate([(f"k{number}", payload(number)) for number in range(first, first + size)])
        for first in range(0, count * size, size)
    ]


def test_an_answer_of_aggregates_larger_than_one_call_is_read_to_the_batch_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    # One GetRecords answer holds up to 10,000 Kinesis records, and an aggregate many user records
    # each: an answer can hold more user records than one call's grant (here 4 for 15). The read goes
    # on within the answer to the shard's cap; until 2026-11-28 it stopped at the first grant, ended
    # the batch there and left the answer's rest to be asked again by the next batch.
    monkeypatch.setattr("icestream.ingest.reading.shard_reader.MAX_RECORDS_PER_GET", 4)
    fake = FakeKinesis(_aggregates(3, 5))
    rows, meta, _ = read_fake_shard(fake, max_records=15)
    assert [row["event_id"] for row in rows] == [f"e{number}" for number in range(15)]
    assert (meta["read"], meta["capped"], meta["last_sub"]) == (15, False, None)
    assert sum(1 for name, _ in fake.calls if name == "get_records") == 1


def test_the_cap_still_ends_a_read_inside_an_aggregate_past_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("icestream.ingest.reading.shard_reader.MAX_RECORDS_PER_GET", 4)
    rows, meta, _ = read_fake_shard(FakeKinesis(_aggregates(3, 5)), max_records=7)
    assert [row["event_id"] for row in rows] == [f"e{number}" for number in range(7)]
    # Seven user records: the first aggregate's five and the second's subs 0 and 1.
    assert (meta["read"], meta["capped"], meta["last_sequence"], meta["last_sub"]) == (7, True, "1001", 1)


def test_an_answer_of_aggregates_takes_what_the_tasks_other_shards_left(monkeypatch: pytest.MonkeyPatch) -> None:
    # Shares of 10: the shard of aggregates (one answer, 20 user records) takes the 8 its task-mate left.
    monkeypatch.setattr("icestream.ingest.reading.shard_reader.MAX_RECORDS_PER_GET", 4)
    fakes = {"shardId-1": FakeKinesis(_aggregates(4, 5)), "shardId-2": FakeKinesis([payload(i) for i in range(2)])}
    metas = _pooled(fakes, share=10)
    assert [(meta["read"], meta["rows"]) for meta in metas.values()] == [(18, 18), (2, 2)]
    assert (metas["shardId-1"]["capped"], metas["shardId-1"]["last_sub"]) == (True, 2)
