"""One shard's GetRecords loop against a fake stream: to a cap, to the tip, to a closed shard's end, to a known end."""

from __future__ import annotations

import types
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from icestream.errors import IngestError, ShardReadError
from icestream.ingest.positions import TRIM_HORIZON, after, at_timestamp, ended
from icestream.kinesis_source import fetch
from icestream.kinesis_source.fetch import MAX_ATTEMPTS, MAX_EMPTY_CALLS, MIN_CALL_INTERVAL, Pacer
from tests.helpers.fake_kinesis import FakeKinesis, FakeStream, client_error, payload

SHARD = "shardId-0"


class Clock:
    """A monotonic clock that moves only when the code under test sleeps (no wall clock in the test)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(fetch, "time", types.SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep))
    return clock


@pytest.fixture
def pacer(clock: Clock) -> Pacer:
    return Pacer(sleep=clock.sleep)


def stream_with(count: int) -> tuple[FakeStream, list[str]]:
    stream = FakeStream((SHARD,))
    return stream, stream.put_many(SHARD, count)


def fault_at(stream: FakeStream, call: int, error: Exception) -> None:
    """Make the ``call``-th GetRecords call (1-based) fail with ``error``."""
    original = stream.get_records
    seen = {"calls": 0}

    def get_records(ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803 - boto3's names
        seen["calls"] += 1
        if seen["calls"] == call:
            stream.calls.append(("get_records", {"ShardIterator": ShardIterator, "Limit": Limit}))
            raise error
        return original(ShardIterator, Limit)

    stream.get_records = get_records  # type: ignore[method-assign]


# -- fetch_to_cap ------------------------------------------------------------------------------------


def test_stops_at_the_cap_and_its_iterator_continues_exactly_there(pacer: Pacer) -> None:
    stream, sequences = stream_with(25)
    first = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 10, pacer)
    assert [record[0] for record in first.records] == sequences[:10]
    assert first.end == after(sequences[9])
    assert first.millis_behind == 5000
    assert all(arguments["Limit"] <= 10 for name, arguments in stream.calls if name == "get_records")
    assert first.next_iterator is not None
    iterators = stream.count("get_shard_iterator")
    second = fetch.fetch_to_cap(stream, "s", SHARD, first.end, 10, pacer, first.next_iterator)
    assert [record[0] for record in second.records] == sequences[10:20]
    assert stream.count("get_shard_iterator") == iterators  # the kept iterator saved a call


def test_stops_at_the_tip(pacer: Pacer) -> None:
    stream, sequences = stream_with(5)
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert [record[0] for record in fetched.records] == sequences
    assert fetched.end == after(sequences[-1])
    assert fetched.millis_behind == 0
    assert fetched.calls == stream.count("get_records") == 1
    assert fetched.next_iterator is not None  # an open shard: what arrives next is read from there


def test_reads_page_after_page_until_the_tip(pacer: Pacer) -> None:
    stream, sequences = stream_with(10)
    stream.page = 4
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, after(sequences[0]), 100, pacer)
    assert [record[0] for record in fetched.records] == sequences[1:]
    assert fetched.calls == 3
    assert fetched.end == after(sequences[-1])


def test_a_closed_shard_read_to_its_end_ends_at_end_of_its_last_record(pacer: Pacer) -> None:
    stream, sequences = stream_with(3)
    stream.split(SHARD, ("shardId-1", "shardId-2"))
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert [record[0] for record in fetched.records] == sequences
    assert fetched.end == ended(sequences[-1]) == f"END:{sequences[-1]}"
    assert fetched.next_iterator is None


def test_a_closed_shard_whose_end_comes_in_an_empty_answer(pacer: Pacer) -> None:
    fake = FakeKinesis([payload(i) for i in range(4)], closed=True)  # no NextShardIterator only once empty
    first = fetch.fetch_to_cap(fake, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert len(first.records) == 4
    assert first.end == "AFTER:1003"  # at the tip, not yet known to be the end
    second = fetch.fetch_to_cap(fake, "s", SHARD, first.end, 100, pacer, first.next_iterator)
    assert second.records == []
    assert second.end == "END:1003"
    assert second.next_iterator is None


class EndlessIterators:
    """A closed shard as the emulator serves it: at its end the answers are empty but still carry an iterator."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records

    def get_shard_iterator(self, **arguments: object) -> dict:
        return {"ShardIterator": "0"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict:  # noqa: N803 - boto3's names
        start = int(ShardIterator)
        page = self.records[start : start + Limit]
        return {"Records": page, "NextShardIterator": str(start + len(page)), "MillisBehindLatest": 0}


def test_a_closed_shard_at_its_end_has_ended_though_the_answer_carries_an_iterator(pacer: Pacer) -> None:
    stream, _ = stream_with(3)
    client = EndlessIterators(stream.records[SHARD])
    first = fetch.fetch_to_cap(client, "s", SHARD, TRIM_HORIZON, 100, pacer, closed=True)
    assert len(first.records) == 3
    second = fetch.fetch_to_cap(client, "s", SHARD, first.end, 100, pacer, first.next_iterator, closed=True)
    assert second.end == ended(first.records[-1][0])  # its children may be read now
    open_shard = fetch.fetch_to_cap(client, "s", SHARD, first.end, 100, pacer, first.next_iterator)
    assert open_shard.end == first.end  # an open shard at its tip has not ended


def test_a_closed_shard_already_read_ends_at_its_last_record_with_none_new(pacer: Pacer) -> None:
    stream, sequences = stream_with(3)
    stream.split(SHARD, ("shardId-1",))
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, after(sequences[-1]), 100, pacer)
    assert fetched.records == []
    assert fetched.end == ended(sequences[-1])


def test_an_empty_closed_shard_ends_with_no_sequence_number(pacer: Pacer) -> None:
    stream = FakeStream((SHARD,))
    stream.split(SHARD, ("shardId-1",))
    assert fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer).end == "END:"


def test_nothing_read_keeps_the_start(pacer: Pacer) -> None:
    stream = FakeStream((SHARD,))
    start = at_timestamp(datetime(2026, 11, 21, 5, 0, tzinfo=UTC))
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, start, 100, pacer)
    assert fetched.records == []
    assert fetched.end == start
    assert fetched.next_iterator is not None


def test_a_record_keeps_its_sequence_arrival_key_and_bytes(pacer: Pacer) -> None:
    stream = FakeStream((SHARD,))
    sequence = stream.put(SHARD, b"\x00raw", partition_key="user-7", arrival=1_795_000_000.25)
    (record,) = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer).records
    assert record == (sequence, 1_795_000_000.25, "user-7", b"\x00raw")


def test_throttling_is_retried_with_growing_jittered_backoff(
    pacer: Pacer, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranges: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        ranges.append((low, high))
        return high

    monkeypatch.setattr(fetch, "random", types.SimpleNamespace(uniform=uniform))
    stream, sequences = stream_with(6)
    stream.faults = [client_error("ProvisionedThroughputExceededException")] * 6
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert [record[0] for record in fetched.records] == sequences
    assert fetched.retried == 6
    assert stream.count("get_records") == 7
    # Jitter in [ceiling / 2, ceiling], the ceiling doubling per failure in a row up to 5 s.
    assert [high for _, high in ranges] == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 5.0])
    assert [low for low, _ in ranges] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.5])
    for _, high in ranges:
        assert high in clock.sleeps


def test_gives_up_after_max_attempts_failures_in_a_row(pacer: Pacer) -> None:
    stream, _ = stream_with(3)
    stream.faults = [client_error("ProvisionedThroughputExceededException")] * MAX_ATTEMPTS
    with pytest.raises(ShardReadError, match=f"shard {SHARD}: {MAX_ATTEMPTS} failures in a row"):
        fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert stream.count("get_records") == MAX_ATTEMPTS


def test_one_failure_fewer_than_the_limit_still_reads(pacer: Pacer) -> None:
    stream, sequences = stream_with(3)
    stream.faults = [client_error("InternalFailure", status=500)] * (MAX_ATTEMPTS - 1)
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert [record[0] for record in fetched.records] == sequences


def test_only_failures_in_a_row_count_toward_giving_up(pacer: Pacer) -> None:
    stream, sequences = stream_with(6)
    stream.page = 2
    original = stream.get_records
    seen = {"calls": 0}

    def get_records(ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803 - boto3's names
        seen["calls"] += 1
        if seen["calls"] % MAX_ATTEMPTS:  # MAX_ATTEMPTS - 1 failures before each answer
            raise client_error("ProvisionedThroughputExceededException")
        return original(ShardIterator, Limit)

    stream.get_records = get_records  # type: ignore[method-assign]
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert [record[0] for record in fetched.records] == sequences
    assert fetched.retried == 3 * (MAX_ATTEMPTS - 1)


def test_a_transient_get_shard_iterator_failure_is_retried(pacer: Pacer) -> None:
    stream, sequences = stream_with(2)
    stream.iterator_faults = [client_error("LimitExceededException", "GetShardIterator")] * 2
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert [record[0] for record in fetched.records] == sequences
    assert stream.count("get_shard_iterator") == 3


def test_a_non_transient_error_propagates_at_once(pacer: Pacer, clock: Clock) -> None:
    stream, _ = stream_with(3)
    stream.faults = [client_error("AccessDeniedException")]
    with pytest.raises(ClientError, match="AccessDeniedException"):
        fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert stream.count("get_records") == 1
    assert clock.sleeps == []


def test_an_expired_iterator_is_renewed_after_the_last_record_read(pacer: Pacer) -> None:
    stream, sequences = stream_with(12)
    stream.page = 4
    fault_at(stream, 2, client_error("ExpiredIteratorException"))
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert [record[0] for record in fetched.records] == sequences  # each once, in order
    renewals = [arguments for name, arguments in stream.calls if name == "get_shard_iterator"]
    assert len(renewals) == 2
    assert renewals[1]["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER"
    assert renewals[1]["StartingSequenceNumber"] == sequences[3]


def test_an_expired_kept_iterator_is_renewed_from_the_start(pacer: Pacer) -> None:
    stream, sequences = stream_with(4)
    stream.faults = [client_error("ExpiredIteratorException")]
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, after(sequences[1]), 100, pacer, iterator="stale")
    assert [record[0] for record in fetched.records] == sequences[2:]
    (renewal,) = [arguments for name, arguments in stream.calls if name == "get_shard_iterator"]
    assert renewal["StartingSequenceNumber"] == sequences[1]


def test_a_long_stretch_of_empty_answers_behind_the_tip_ends_the_probe(pacer: Pacer) -> None:
    stream = FakeStream((SHARD,))
    stream.get_records = lambda ShardIterator, Limit: {  # type: ignore[method-assign]  # noqa: N803
        "Records": [],
        "NextShardIterator": ShardIterator,
        "MillisBehindLatest": 60_000,  # a trimmed stretch: behind, yet nothing in it
    }
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert fetched.calls == MAX_EMPTY_CALLS
    assert fetched.end == TRIM_HORIZON


def test_a_deleted_stream_stops_with_what_to_do(pacer: Pacer) -> None:
    stream = FakeStream((SHARD,))
    stream.iterator_faults = [client_error("ResourceNotFoundException", "GetShardIterator")]
    with pytest.raises(IngestError, match=r"no longer exists.*new checkpoint"):
        fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)


# -- pacing -----------------------------------------------------------------------------------------


def test_calls_of_one_shard_and_api_are_paced_to_five_a_second(pacer: Pacer, clock: Clock) -> None:
    stream, _ = stream_with(6)
    stream.page = 2
    fetched = fetch.fetch_to_cap(stream, "s", SHARD, TRIM_HORIZON, 100, pacer)
    assert len(fetched.records) == 6
    assert fetched.calls == 3
    # GetShardIterator has its own limit, so the first GetRecords does not wait; the next two do.
    assert clock.sleeps == pytest.approx([MIN_CALL_INTERVAL, MIN_CALL_INTERVAL])


def test_the_pacer_waits_only_for_the_rest_of_a_slot_and_per_shard_and_api(pacer: Pacer, clock: Clock) -> None:
    pacer.wait("a", "GetRecords")
    pacer.wait("b", "GetRecords")  # another shard
    pacer.wait("a", "GetShardIterator")  # another API
    assert clock.sleeps == []
    clock.now += MIN_CALL_INTERVAL * 0.75
    pacer.wait("a", "GetRecords")
    assert clock.sleeps == pytest.approx([MIN_CALL_INTERVAL * 0.25])
    clock.now += MIN_CALL_INTERVAL
    pacer.wait("a", "GetRecords")
    assert len(clock.sleeps) == 1


# -- fetch_to_end -----------------------------------------------------------------------------------


def test_reads_to_exactly_the_end_record_though_the_answer_holds_more(pacer: Pacer) -> None:
    stream, sequences = stream_with(10)
    records = fetch.fetch_to_end(stream, "s", SHARD, TRIM_HORIZON, after(sequences[4]), pacer)
    assert [record[0] for record in records] == sequences[:5]
    assert stream.count("get_records") == 1


def test_reads_to_the_end_over_several_pages_from_a_position(pacer: Pacer) -> None:
    stream, sequences = stream_with(10)
    stream.page = 3
    records = fetch.fetch_to_end(stream, "s", SHARD, after(sequences[1]), after(sequences[8]), pacer)
    assert [record[0] for record in records] == sequences[2:9]


def test_reads_a_closed_shard_to_its_end(pacer: Pacer) -> None:
    stream, sequences = stream_with(4)
    stream.split(SHARD, ("shardId-1",))
    records = fetch.fetch_to_end(stream, "s", SHARD, after(sequences[0]), ended(sequences[-1]), pacer)
    assert [record[0] for record in records] == sequences[1:]


def test_an_end_with_no_record_reads_nothing(pacer: Pacer) -> None:
    stream, _ = stream_with(4)
    assert fetch.fetch_to_end(stream, "s", SHARD, TRIM_HORIZON, "END:", pacer) == []
    assert stream.calls == []


def test_an_expired_iterator_on_the_way_to_the_end_is_renewed(pacer: Pacer) -> None:
    stream, sequences = stream_with(9)
    stream.page = 3
    fault_at(stream, 2, client_error("ExpiredIteratorException"))
    records = fetch.fetch_to_end(stream, "s", SHARD, TRIM_HORIZON, after(sequences[7]), pacer)
    assert [record[0] for record in records] == sequences[:8]


def test_records_past_retention_stop_the_replay(pacer: Pacer) -> None:
    stream, sequences = stream_with(10)
    del stream.records[SHARD][:6]  # trimmed: the shard now starts after the batch's end
    with pytest.raises(IngestError, match="no longer holds the records of the batch being replayed"):
        fetch.fetch_to_end(stream, "s", SHARD, TRIM_HORIZON, after(sequences[3]), pacer)


def test_the_tip_before_the_end_stops_the_replay(pacer: Pacer) -> None:
    stream, sequences = stream_with(3)
    with pytest.raises(IngestError, match="past the stream's retention"):
        fetch.fetch_to_end(stream, "s", SHARD, TRIM_HORIZON, after(str(int(sequences[-1]) + 50)), pacer)


def test_a_closed_shard_ending_before_the_end_stops_the_replay(pacer: Pacer) -> None:
    stream, sequences = stream_with(3)
    stream.split(SHARD, ("shardId-1",))
    with pytest.raises(IngestError, match="no longer holds"):
        fetch.fetch_to_end(stream, "s", SHARD, TRIM_HORIZON, ended(str(int(sequences[-1]) + 50)), pacer)


def test_a_deleted_stream_stops_the_replay(pacer: Pacer) -> None:
    stream, sequences = stream_with(3)
    stream.iterator_faults = [client_error("ResourceNotFoundException", "GetShardIterator")]
    with pytest.raises(IngestError, match="no longer exists"):
        fetch.fetch_to_end(stream, "s", SHARD, TRIM_HORIZON, after(sequences[-1]), pacer)
