"""The stream reader against a fake stream: offsets as shard positions, each batch's end fixed by reading.

Spark's calls are made in Spark's order (MicroBatchExecution): ``latestOffset`` fixes a batch's end,
``initialOffset`` gives the first batch's start, ``partitions(start, end)`` plans its tasks, ``read``
runs on an executor with a reader unpickled afresh, ``commit(end)`` follows the sink's commit. A
restarted query's reader is a new one that is told of the last logged offset by
``partitions(end, end)`` (Spark's ``setLatestSeenOffset``) or learns it at ``commit``.
"""

from __future__ import annotations

import types
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from icestream.errors import ConfigError, IngestError, ServiceUnavailableError
from icestream.ingest.gate import ITERATOR_REUSE_SECONDS
from icestream.ingest.positions import TRIM_HORIZON, after, at_timestamp, ended
from icestream.kinesis_source import crash_drill, stream_reader
from icestream.kinesis_source.fetch import Pacer
from icestream.kinesis_source.options import parse_options
from icestream.kinesis_source.stream_reader import KinesisStreamReader, ShardRanges
from tests.helpers.fake_kinesis import FakeStream, client_error

A, B, C = "shardId-000000000000", "shardId-000000000001", "shardId-000000000002"
CREATED = datetime(2026, 11, 21, 5, 0, tzinfo=UTC)
START = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)  # when a "latest" query starts


class Clock:
    """The monotonic clock iterator reuse is judged by: it moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 5000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """A clock that stands still and a fixed "now": nothing depends on the machine's clock or speed."""
    clock = Clock()
    monkeypatch.setattr(stream_reader, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(stream_reader, "datetime", types.SimpleNamespace(now=lambda tz: START))
    return clock


def reader_of(stream: FakeStream, **given: str) -> KinesisStreamReader:
    options = parse_options(
        {"streamName": "s", "regionName": "us-east-1", "endpointUrl": "http://127.0.0.1:1", **given}
    )
    reader = KinesisStreamReader(options, client=stream)
    reader._pacer = Pacer(sleep=lambda seconds: None)  # the pacing is fetch's own test
    return reader


def created_of(stream: FakeStream) -> str:
    return f"{stream.created.timestamp():.3f}"


def ranges_of(partitions: list[ShardRanges]) -> dict[str, Any]:
    return {part.shard_id: part for task in partitions for part in task.ranges}


def rows_of(reader: KinesisStreamReader, partitions: list[ShardRanges]) -> list[dict[str, Any]]:
    rows = []
    for partition in partitions:
        for batch in reader.read(partition):
            rows.extend(batch.to_pylist())
    return rows


def iterator_requests(stream: FakeStream, shard_id: str) -> list[dict[str, Any]]:
    return [
        arguments
        for name, arguments in stream.calls
        if name == "get_shard_iterator" and arguments["ShardId"] == shard_id
    ]


# -- the initial offset -----------------------------------------------------------------------------


def test_trim_horizon_starts_every_shard_at_its_oldest_record() -> None:
    stream = FakeStream((A, B))
    offset = reader_of(stream, startingPosition="trim_horizon").initialOffset()
    assert offset == {"stream": "s", "created": created_of(stream), "shards": {A: TRIM_HORIZON, B: TRIM_HORIZON}}


def test_latest_starts_every_shard_at_the_time_the_query_starts() -> None:
    stream = FakeStream((A, B))
    offset = reader_of(stream).initialOffset()
    assert offset["shards"] == {A: at_timestamp(START), B: at_timestamp(START)}


def test_at_timestamp_starts_every_shard_there() -> None:
    stream = FakeStream((A,))
    offset = reader_of(stream, startingPosition="at_timestamp:2026-11-20T00:00:00Z").initialOffset()
    assert offset["shards"] == {A: at_timestamp(datetime(2026, 11, 20, tzinfo=UTC))}


def test_the_children_of_an_unread_parent_are_not_in_the_initial_offset() -> None:
    stream = FakeStream((A,))
    stream.put_many(A, 2)
    stream.split(A, (B, C))
    offset = reader_of(stream, startingPosition="trim_horizon").initialOffset()
    assert offset["shards"] == {A: TRIM_HORIZON}


def test_shard_positions_are_kept_unlisted_ones_dropped_and_others_read_from_their_start() -> None:
    stream = FakeStream((A, B))
    given = '{"shardId-000000000000": "AFTER:1001", "shardId-000000000099": "AFTER:5"}'
    offset = reader_of(stream, startingPosition=given).initialOffset()
    assert offset["shards"] == {A: "AFTER:1001", B: TRIM_HORIZON}


def test_shard_positions_of_a_finished_parent_let_its_children_start() -> None:
    stream = FakeStream((A,))
    last = stream.put_many(A, 2)[-1]
    stream.split(A, (B, C))
    offset = reader_of(stream, startingPosition=f'{{"{A}": "END:{last}"}}').initialOffset()
    assert offset["shards"] == {A: ended(last), B: TRIM_HORIZON, C: TRIM_HORIZON}


def test_a_missing_stream_is_a_config_error() -> None:
    stream = FakeStream((A,))
    stream.describe_stream_summary = _raising(client_error("ResourceNotFoundException", "DescribeStreamSummary"))  # type: ignore[method-assign]
    with pytest.raises(ConfigError, match="Kinesis stream s does not exist in us-east-1"):
        reader_of(stream).initialOffset()


def test_a_service_error_or_no_answer_says_the_service_is_unavailable() -> None:
    stream = FakeStream((A,))
    stream.describe_stream_summary = _raising(client_error("InternalFailure", "DescribeStreamSummary", 500))  # type: ignore[method-assign]
    with pytest.raises(ServiceUnavailableError, match="did not describe stream s"):
        reader_of(stream).initialOffset()
    stream.describe_stream_summary = _raising(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))  # type: ignore[method-assign]
    with pytest.raises(ServiceUnavailableError, match=r"http://127\.0\.0\.1:1 does not answer"):
        reader_of(stream).initialOffset()


def _raising(error: Exception) -> Any:
    def call(**arguments: Any) -> Any:
        raise error

    return call


# -- the latest offset ------------------------------------------------------------------------------


def test_the_end_moves_only_the_shards_with_new_records() -> None:
    stream = FakeStream((A, B))
    reader = reader_of(stream, startingPosition="trim_horizon")
    sequences = stream.put_many(A, 3)
    end = reader.latestOffset()
    assert end["shards"] == {A: after(sequences[-1]), B: TRIM_HORIZON}
    assert (end["stream"], end["created"]) == ("s", created_of(stream))


def test_nothing_new_gives_the_same_offset_so_spark_runs_no_batch() -> None:
    stream = FakeStream((A, B))
    stream.put_many(A, 3)
    reader = reader_of(stream, startingPosition="trim_horizon")
    end = reader.latestOffset()
    reader.partitions(reader.initialOffset(), end)
    reader.commit(end)
    again = reader.latestOffset()
    assert again == end
    assert reader.latestOffset() == end


def test_an_idle_stream_gives_the_initial_offset() -> None:
    stream = FakeStream((A, B))
    reader = reader_of(stream, startingPosition="trim_horizon")
    assert reader.latestOffset() == reader.initialOffset()


def test_each_shard_is_read_up_to_the_cap_per_batch() -> None:
    stream = FakeStream((A, B))
    a_sequences, b_sequences = stream.put_many(A, 5), stream.put_many(B, 2)
    reader = reader_of(stream, startingPosition="trim_horizon", maxFetchRecordsPerShard="3")
    first = reader.latestOffset()
    assert first["shards"] == {A: after(a_sequences[2]), B: after(b_sequences[1])}
    assert [len(part.records) for part in ranges_of(reader.partitions(reader.initialOffset(), first)).values()] == [
        3,
        2,
    ]
    reader.commit(first)
    second = reader.latestOffset()
    assert second["shards"] == {A: after(a_sequences[4]), B: after(b_sequences[1])}
    assert list(ranges_of(reader.partitions(first, second))) == [A]


def test_an_end_offset_says_how_far_behind_the_tip_each_read_shard_is() -> None:
    stream = FakeStream((A, B))
    stream.put_many(A, 5)
    stream.put_many(B, 2)
    reader = reader_of(stream, startingPosition="trim_horizon", maxFetchRecordsPerShard="3")
    first = reader.latestOffset()
    assert first["millisBehindLatest"] == {A: 5000, B: 0}  # A stopped at the cap, B at its tip
    reader.partitions(reader.initialOffset(), first)
    reader.commit(first)
    assert reader.latestOffset()["millisBehindLatest"] == {A: 0, B: 0}  # A read on to its tip
    assert "millisBehindLatest" not in reader.initialOffset()


def test_the_next_batch_reads_on_where_the_last_ended() -> None:
    stream = FakeStream((A,))
    first_sequences = stream.put_many(A, 2)
    reader = reader_of(stream, startingPosition="trim_horizon")
    first = reader.latestOffset()
    reader.partitions(reader.initialOffset(), first)
    reader.commit(first)
    later = stream.put_many(A, 2)
    second = reader.latestOffset()
    (part,) = ranges_of(reader.partitions(first, second)).values()
    assert (part.start, part.end) == (after(first_sequences[-1]), after(later[-1]))
    assert [record[0] for record in part.records] == later


def test_the_next_probe_goes_on_with_the_iterator_the_last_one_ended_with() -> None:
    stream = FakeStream((A,))
    stream.put_many(A, 2)
    reader = reader_of(stream, startingPosition="trim_horizon")
    first = reader.latestOffset()
    reader.partitions(reader.initialOffset(), first)
    reader.commit(first)
    requests = len(iterator_requests(stream, A))
    later = stream.put_many(A, 2)
    assert reader.latestOffset()["shards"] == {A: after(later[-1])}
    assert len(iterator_requests(stream, A)) == requests  # no GetShardIterator call


def test_an_iterator_near_its_expiry_is_not_used(clock: Clock) -> None:
    stream = FakeStream((A,))
    stream.put_many(A, 2)
    reader = reader_of(stream, startingPosition="trim_horizon")
    first = reader.latestOffset()
    reader.partitions(reader.initialOffset(), first)
    reader.commit(first)
    requests = len(iterator_requests(stream, A))
    clock.now += ITERATOR_REUSE_SECONDS
    later = stream.put_many(A, 1)
    assert reader.latestOffset()["shards"] == {A: after(later[-1])}
    assert iterator_requests(stream, A)[requests:] == [
        {
            "StreamName": "s",
            "ShardId": A,
            "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
            "StartingSequenceNumber": first["shards"][A][6:],
        }
    ]


def test_an_iterator_kept_for_another_position_is_not_used() -> None:
    stream = FakeStream((A,))
    sequences = stream.put_many(A, 4)
    reader = reader_of(stream, startingPosition="trim_horizon", maxFetchRecordsPerShard="2")
    older = reader.latestOffset()  # A after its second record
    reader.partitions(reader.initialOffset(), older)
    newer = reader.latestOffset()  # A after its fourth; the kept iterator continues there
    assert newer["shards"] == {A: after(sequences[3])}
    reader.partitions(reader.initialOffset(), older)  # Spark plans the older batch again (a retry)
    again = reader.latestOffset()
    assert again == newer  # read again from the older end, not from the kept iterator's position
    (part,) = ranges_of(reader.partitions(older, again)).values()
    assert [record[0] for record in part.records] == sequences[2:]


def test_children_of_a_split_are_read_only_after_their_parent_reached_its_end() -> None:
    stream = FakeStream((A,))
    parent = stream.put_many(A, 2)
    stream.split(A, (B, C))
    child = stream.put_many(B, 3)
    reader = reader_of(stream, startingPosition="trim_horizon")
    first = reader.latestOffset()
    assert first["shards"] == {A: ended(parent[-1])}
    assert iterator_requests(stream, B) == []
    reader.partitions(reader.initialOffset(), first)
    reader.commit(first)
    second = reader.latestOffset()
    assert second["shards"] == {A: ended(parent[-1]), B: after(child[-1]), C: TRIM_HORIZON}
    assert [request["ShardIteratorType"] for request in iterator_requests(stream, B)] == ["TRIM_HORIZON"]
    ranges = ranges_of(reader.partitions(first, second))
    assert list(ranges) == [B]  # the parent is done, the empty child has nothing to read
    assert [record[0] for record in ranges[B].records] == child


def test_a_closed_shard_reaching_its_end_with_no_new_record_plans_no_task() -> None:
    stream = FakeStream((A,))
    parent = stream.put_many(A, 2)
    reader = reader_of(stream, startingPosition="trim_horizon")
    first = reader.latestOffset()
    reader.partitions(reader.initialOffset(), first)
    reader.commit(first)
    stream.split(A, (B,))
    second = reader.latestOffset()
    assert second["shards"] == {A: ended(parent[-1])}
    assert reader.partitions(first, second) == []


# -- partitions and reads ---------------------------------------------------------------------------


def test_partitions_ship_the_records_read_when_the_end_was_fixed() -> None:
    stream = FakeStream((A, B, C))
    stream.put_many(A, 3)
    stream.put_many(C, 2)
    reader = reader_of(stream, startingPosition="trim_horizon")
    end = reader.latestOffset()
    calls = len(stream.calls)
    partitions = reader.partitions(reader.initialOffset(), end)
    ranges = ranges_of(partitions)
    assert list(ranges) == [A, C]
    assert [record[3] for record in ranges[A].records] == [record["Data"] for record in stream.records[A]]
    assert len(ranges[C].records) == 2
    rows = rows_of(reader, partitions)
    assert len(rows) == 5
    assert {row["shardId"] for row in rows} == {A, C}
    assert stream.count("get_records") == sum(1 for name, _ in stream.calls[:calls] if name == "get_records")


def test_a_replay_reads_the_same_rows_as_the_shipped_records() -> None:
    stream = FakeStream((A, B))
    stream.put_many(A, 4)
    stream.put_many(B, 3)
    reader = reader_of(stream, startingPosition="trim_horizon", maxFetchRecordsPerShard="3")
    start = reader.initialOffset()
    end = reader.latestOffset()
    shipped = reader.partitions(start, end)
    stream.put_many(A, 2)  # arrived after the end was fixed: not the batch's
    replay_reader = reader_of(stream, startingPosition="trim_horizon")  # a restart: only the logged offsets
    replayed = replay_reader.partitions(start, end)
    assert all(part.records is None for part in ranges_of(replayed).values())
    assert {shard: (part.start, part.end) for shard, part in ranges_of(replayed).items()} == {
        shard: (part.start, part.end) for shard, part in ranges_of(shipped).items()
    }
    reads = stream.count("get_records")
    replayed_rows = rows_of(replay_reader, replayed)
    assert stream.count("get_records") > reads  # the task read the shards again
    shipped_rows = rows_of(reader, shipped)
    assert len(shipped_rows) == 6
    assert replayed_rows == shipped_rows


def test_records_past_the_shipping_budget_are_read_by_the_task_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = FakeStream((A, B))
    stream.put_many(A, 4)
    stream.put_many(B, 1)
    small = len(stream.records[B][0]["Data"])
    monkeypatch.setattr(stream_reader, "SHIP_BYTES", 2 * small)  # A's four records exceed it, B's one not
    reader = reader_of(stream, startingPosition="trim_horizon")
    partitions = reader.partitions(reader.initialOffset(), reader.latestOffset())
    ranges = ranges_of(partitions)
    assert ranges[A].records is None
    assert ranges[B].records is not None
    reads = stream.count("get_records")
    rows = rows_of(reader, partitions)
    assert stream.count("get_records") > reads  # A read again, by its task
    assert len(rows) == 5


def test_records_probed_for_another_range_are_not_shipped() -> None:
    stream = FakeStream((A,))
    stream.put_many(A, 4)
    reader = reader_of(stream, startingPosition="trim_horizon")
    end = reader.latestOffset()
    other_start = {**end, "shards": {A: after(stream.records[A][0]["SequenceNumber"])}}
    (part,) = ranges_of(reader.partitions(other_start, end)).values()
    assert part.records is None
    assert [row["sequenceNumber"] for row in rows_of(reader, reader.partitions(other_start, end))] == [
        record["SequenceNumber"] for record in stream.records[A][1:]
    ]


def test_partitions_group_shards_per_task() -> None:
    shards = ("shardId-a", "shardId-b", "shardId-c")
    stream = FakeStream(shards)
    for shard in shards:
        stream.put_many(shard, 1)
    reader = reader_of(stream, startingPosition="trim_horizon", shardsPerTask="2")
    partitions = reader.partitions(reader.initialOffset(), reader.latestOffset())
    assert [[part.shard_id for part in task.ranges] for task in partitions] == [
        ["shardId-a", "shardId-b"],
        ["shardId-c"],
    ]
    assert len(rows_of(reader, partitions)) == 3


# -- restarts and incarnations ----------------------------------------------------------------------


def test_a_restarted_reader_told_of_the_committed_end_reads_on_from_it() -> None:
    stream = FakeStream((A, B))
    stream.put_many(A, 3)
    reader = reader_of(stream, startingPosition="trim_horizon")
    end = reader.latestOffset()
    reader.partitions(reader.initialOffset(), end)
    reader.commit(end)
    restarted = reader_of(stream, startingPosition="trim_horizon")
    restarted.commit(end)
    assert restarted.latestOffset() == end
    new = stream.put_many(A, 1)
    after_restart = restarted.latestOffset()
    assert after_restart["shards"] == {A: after(new[0]), B: TRIM_HORIZON}
    (part,) = ranges_of(restarted.partitions(end, after_restart)).values()
    assert [record[0] for record in part.records] == new


def test_a_restarted_reader_told_by_partitions_of_the_last_offset_reads_on_from_it() -> None:
    stream = FakeStream((A,))
    stream.put_many(A, 3)
    reader = reader_of(stream, startingPosition="trim_horizon")
    end = reader.latestOffset()
    restarted = reader_of(stream, startingPosition="trim_horizon")
    assert restarted.partitions(end, end) == []  # Spark's setLatestSeenOffset
    before = len(iterator_requests(stream, A))
    assert restarted.latestOffset() == end
    assert [request["ShardIteratorType"] for request in iterator_requests(stream, A)[before:]] == [
        "AFTER_SEQUENCE_NUMBER"
    ]


def test_offsets_of_a_deleted_and_recreated_stream_stop_the_query() -> None:
    stream = FakeStream((A,))
    stream.put_many(A, 2)
    reader = reader_of(stream, startingPosition="trim_horizon")
    end = reader.latestOffset()
    recreated = FakeStream((A,), created=CREATED + timedelta(days=1))
    recreated.put_many(A, 5)
    restarted = reader_of(recreated, startingPosition="trim_horizon")
    restarted.commit(end)
    with pytest.raises(IngestError, match="deleted and created again"):
        restarted.latestOffset()


def test_the_first_batch_of_a_latest_query_ships_the_records_its_end_was_fixed_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark asks latestOffset before initialOffset for the first batch: both must mean the same start."""
    moments = iter([START, START + timedelta(seconds=2), START + timedelta(seconds=4)])
    monkeypatch.setattr(stream_reader, "datetime", types.SimpleNamespace(now=lambda tz: next(moments)))
    stream = FakeStream((A,))
    stream.put(A, b"before the start", arrival=START.timestamp() - 1)
    arrived = stream.put(A, b"after the start", arrival=START.timestamp() + 1)
    reader = reader_of(stream)
    end = reader.latestOffset()
    assert end["shards"] == {A: after(arrived)}
    start = reader.initialOffset()  # the first batch's start, asked for after latestOffset
    assert start["shards"] == {A: at_timestamp(START)}
    partitions = reader.partitions(start, end)
    (part,) = ranges_of(partitions).values()
    assert [record[0] for record in part.records] == [arrived]
    assert [row["data"] for row in rows_of(reader, partitions)] == [b"after the start"]


# -- the crash drill's stages -----------------------------------------------------------------------


def test_each_stage_reaches_its_crash_point_and_a_drilled_read_hands_over_half_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reached: list[str] = []
    monkeypatch.setattr(crash_drill, "reached", reached.append)
    monkeypatch.setenv(crash_drill.ENV, "read:1")
    stream = FakeStream((A,))
    stream.put_many(A, 6)
    reader = reader_of(stream, startingPosition="trim_horizon")
    end = reader.latestOffset()
    partitions = reader.partitions(reader.initialOffset(), end)
    batches = [batch.num_rows for partition in partitions for batch in reader.read(partition)]
    assert batches == [3, 3]
    assert reached == ["latest_offset", "partitions", "read"]


def test_a_read_without_the_drill_hands_over_the_shard_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(crash_drill.ENV, raising=False)
    stream = FakeStream((A,))
    stream.put_many(A, 6)
    reader = reader_of(stream, startingPosition="trim_horizon")
    partitions = reader.partitions(reader.initialOffset(), reader.latestOffset())
    assert [batch.num_rows for partition in partitions for batch in reader.read(partition)] == [6]


# -- the executors' client --------------------------------------------------------------------------


def test_a_worker_opens_one_client_per_connection_without_botocore_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[dict[str, Any]] = []

    def client(self: Any, **arguments: Any) -> object:
        opened.append({"connection": self, **arguments})
        return object()

    monkeypatch.setattr(stream_reader, "_CLIENTS", {})
    monkeypatch.setattr(stream_reader.KinesisConnection, "client", client)
    local = parse_options({"streamName": "s", "regionName": "us-east-1", "endpointUrl": "http://127.0.0.1:4567"})
    aws = parse_options({"streamName": "s", "regionName": "us-east-1"})
    first = stream_reader.worker_client(local)
    assert stream_reader.worker_client(local) is first
    assert stream_reader.worker_client(aws) is not first
    assert [(call["connection"].profile, call["max_attempts"]) for call in opened] == [("local", 0), ("aws", 0)]
    assert KinesisStreamReader(local).client() is first
