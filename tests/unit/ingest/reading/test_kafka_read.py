"""The Kafka read's driver side without a broker: where each partition's range starts and ends, and the stats."""

from __future__ import annotations

import json

import pytest

from icestream.errors import IngestError
from icestream.ingest.reading.kafka_read import (
    OffsetRange,
    first_offset,
    merged_stats,
    offsets_json,
    partition_id,
    partition_number,
    plan_ranges,
)
from icestream.ingest.reading.read_stats import ReadStats
from icestream.ingest.reading.shard_plan import ShardPlan
from icestream.kafka.topics import PartitionOffsets


def plan(partition: int, start: str) -> ShardPlan:
    return ShardPlan(partition_id(partition), start, closed=False, events_committed=None, rejects_committed=None)


def test_partition_ids_read_back_as_numbers() -> None:
    assert partition_id(3) == "partition-000000000003"
    assert partition_number(partition_id(41)) == 41


@pytest.mark.parametrize(
    ("start", "first"),
    [("AFTER:41", 42), ("END:9", 10), ("TRIM_HORIZON", 5), ("AT_TIMESTAMP:1700000000.000", 17)],
)
def test_the_first_offset_follows_the_position(start: str, first: int) -> None:
    assert first_offset(start, low=5, resolved_at={0: 17}, partition=0) == first


def test_ranges_end_at_the_share_or_the_partitions_next_offset_and_skip_partitions_with_nothing_new() -> None:
    offsets = {0: PartitionOffsets(0, 0, 100), 1: PartitionOffsets(1, 0, 30), 2: PartitionOffsets(2, 0, 7)}
    plans = [plan(0, "AFTER:9"), plan(1, "TRIM_HORIZON"), plan(2, "AFTER:6")]
    ranges = plan_ranges(plans, offsets, {}, per_partition=50, fail_on_data_loss=True, topic="t")
    assert ranges == {
        partition_id(0): OffsetRange(0, 10, 60, capped=True),
        partition_id(1): OffsetRange(1, 0, 30, capped=False),
    }


def test_offsets_retention_deleted_stop_the_read_or_are_skipped_and_counted() -> None:
    offsets = {0: PartitionOffsets(0, 40, 50)}
    with pytest.raises(IngestError, match="offsets 10 to 39 were deleted"):
        plan_ranges([plan(0, "AFTER:9")], offsets, {}, per_partition=100, fail_on_data_loss=True, topic="t")
    ranges = plan_ranges([plan(0, "AFTER:9")], offsets, {}, per_partition=100, fail_on_data_loss=False, topic="t")
    assert ranges == {partition_id(0): OffsetRange(0, 40, 50, capped=False, skipped=30)}


def test_a_range_without_rows_still_moves_its_position_to_its_end() -> None:
    ranges = {partition_id(0): OffsetRange(0, 10, 20, capped=False), partition_id(1): OffsetRange(1, 0, 5, True)}
    read = ReadStats(partition_id(1), read=5, good=5)
    merged = {stats.shard_id: stats for stats in merged_stats([read], ranges)}
    assert merged[partition_id(0)].last_sequence == "19"  # only a transaction's markers there: no meta row
    assert (merged[partition_id(1)].last_sequence, merged[partition_id(1)].capped) == ("4", True)


def test_one_partition_read_by_two_tasks_is_refused() -> None:
    ranges = {partition_id(0): OffsetRange(0, 0, 10, capped=False)}
    with pytest.raises(IngestError, match="read by two tasks"):
        merged_stats([ReadStats(partition_id(0)), ReadStats(partition_id(0))], ranges)


def test_offsets_are_given_to_spark_per_topic_and_partition() -> None:
    assert json.loads(offsets_json("events", {1: 40, 0: 12})) == {"events": {"0": 12, "1": 40}}


def test_records_become_the_ingest_s_rows_with_one_meta_row_per_partition() -> None:
    import gzip
    from datetime import UTC, datetime

    import pyarrow as pa

    from icestream.ingest.reading.kafka_read import kafka_arrow
    from icestream.ingest.reading.shard_reader import ReadOptions
    from tests.helpers.streams import event_payload

    good, other = event_payload(1, "u1"), event_payload(2, "u2")
    values = [good, b"not json", gzip.compress(other), good]  # the last: a repeat of ev-1 in the same read
    moment = datetime(2026, 12, 1, tzinfo=UTC)
    batch = pa.RecordBatch.from_pydict(
        {
            "partition": pa.array([0, 0, 0, 0], pa.int32()),
            "offset": pa.array([10, 11, 12, 13], pa.int64()),
            "key": [b"u1", b"u1", b"u2", b"u1"],
            "value": values,
            "timestamp": pa.array([moment] * 4, pa.timestamp("us", tz="UTC")),
        }
    )
    options = ReadOptions(connection=None, stream_name="t", batch_id=3, ingest_ts=moment)
    ranges = {0: OffsetRange(0, 10, 16, capped=True)}
    out = list(kafka_arrow(options, {0: plan(0, "AFTER:9")}, ranges)([batch]))
    rows = pa.Table.from_batches(out).to_pylist()
    assert [(row["kind"], row["sequence_number"]) for row in rows] == [
        ("event", "10"), ("reject", "11"), ("event", "12"), ("meta", "15")
    ]  # fmt: skip
    assert rows[0]["shard_id"] == partition_id(0)
    assert rows[0]["partition_key"] == "u1"
    assert rows[1]["reason"] == "invalid_json"
    stats = ReadStats.from_json(rows[-1]["meta"])
    assert (stats.read, stats.good, stats.rejected, stats.deduplicated) == (4, 3, 1, 1)
    assert (stats.last_sequence, stats.capped) == ("15", True)  # the range's end, past its last record
