"""The ingest's Kafka side: a batch's offset ranges fixed on the driver, read by Spark's Kafka source.

``icestream ingest --source kafka`` runs the same sink as the Kinesis ingest (dedupe, rejects,
routing, schema evolution, change data, the aggregate, the raw archive, the lease) over a topic.
Only the read differs, and it is Spark's own: each batch is one ``spark.read.format("kafka")`` with
``assign``, ``startingOffsets`` and ``endingOffsets`` given per partition, so the batch's records are
exactly the offsets planned, whichever task reads them and however often Spark retries one.

A topic partition is a shard here: its id is ``partition-`` and its number in 12 digits
(:func:`partition_id`), its position is ``AFTER:<offset>`` (everything up to that offset is done),
and positions live in the snapshot summary of each table's commit, as for Kinesis shards
(:mod:`icestream.ingest.positions`). So a crash at any point resumes from what each table committed,
and a lost Spark checkpoint loses nothing: there is none.

Each batch, on the driver:

1. the topic's partitions and their first kept and next offsets (``kafka.topics.offsets``): one
   metadata request and two offset answers per partition, no Spark job; a partition added mid-run
   appears here and is read from its first offset (Kafka's keys move to it only from then on);
2. per partition, the range from its position to at most its share of the batch's records;
3. one Spark job: the Kafka source's rows through :func:`kafka_arrow` (``mapInArrow``), which turns
   each record into the ingest's rows with :class:`~icestream.ingest.reading.record_rows.RecordRows`
   (the same code as the Kinesis read: gzip/zlib and KPL payloads expanded, malformed records
   rejected, replays below the committed offsets skipped), kept in Spark's block store.

The end of each range is the next offset the partition had when the batch was planned, so a range
that ends on offsets holding no record (a transaction's markers) still moves the position past them.
Records retention deleted before they were read are a clear error (``fail_on_data_loss``, as
Spark's ``failOnDataLoss``), or, when asked, skipped from the first kept offset and counted.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from icestream.errors import IngestError
from icestream.ingest import positions as pos
from icestream.ingest.expand import SPECIAL_FIRST_BYTES, expand_record, needs_decoding
from icestream.ingest.options import IngestOptions
from icestream.ingest.reading import shard_plan
from icestream.ingest.reading.planner import ReadBatch, TablePositions, with_committed
from icestream.ingest.reading.read_stats import ReadStats
from icestream.ingest.reading.record_rows import ARROW_CHUNK_ROWS, RecordRows, arrow_schema, record_batch, row_schema
from icestream.ingest.reading.shard_reader import ReadOptions
from icestream.ingest.reading.spark_job import release_rows, shard_share
from icestream.kafka import topics
from icestream.kafka.connection import KafkaConnection
from icestream.limits import DEFAULT_RECORDS_PER_BATCH, DEFAULT_RECORDS_PER_SHARD
from icestream.runtime.arrow_frames import map_in_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PARTITION_PREFIX = "partition-"
# The Kafka source's columns the read needs (its others: topic, timestampType, headers).
KAFKA_COLUMNS = ("partition", "offset", "key", "value", "timestamp")


def partition_id(partition: int) -> str:
    """A topic partition's id as a shard's: ``partition-000000000003``."""
    return f"{PARTITION_PREFIX}{partition:012d}"


def partition_number(shard_id: str) -> int:
    """The partition number of :func:`partition_id`'s id."""
    return int(shard_id.removeprefix(PARTITION_PREFIX))


def stream_label(topic: str) -> str:
    """What the tables record as their source for a topic (a Kinesis stream's name is recorded as it is)."""
    return f"kafka:{topic}"


@dataclass(frozen=True)
class OffsetRange:
    """One partition's records in one batch: ``first`` up to, not including, ``end``."""

    partition: int
    first: int
    end: int
    capped: bool  # records past ``end`` were there when the batch was planned
    skipped: int = 0  # records retention deleted before they were read (fail_on_data_loss off)


def first_offset(start: str, low: int, resolved_at: Mapping[int, int], partition: int) -> int:
    """The first offset a partition's plan reads: from its position, or where a new partition starts.

    Args:
        start: The plan's start: ``AFTER:<offset>``, ``TRIM_HORIZON`` or ``AT_TIMESTAMP:<epoch>``.
        low: The partition's first kept offset.
        resolved_at: Per partition, the offset an ``AT_TIMESTAMP`` start resolved to.
        partition: The partition.
    """
    done = pos.last_sequence(start)
    if done is not None:
        return int(done) + 1
    if start.startswith("AT_TIMESTAMP:"):
        return resolved_at[partition]
    return low


def plan_ranges(
    plans: Iterable[shard_plan.ShardPlan],
    offsets: Mapping[int, topics.PartitionOffsets],
    resolved_at: Mapping[int, int],
    per_partition: int,
    fail_on_data_loss: bool,
    topic: str,
) -> dict[str, OffsetRange]:
    """Each plan's offset range for this batch; a partition with nothing new gets none.

    Raises:
        IngestError: If a partition's next offset to read was deleted by retention, and
            ``fail_on_data_loss`` is on.
    """
    ranges = {}
    for plan in plans:
        partition = partition_number(plan.shard_id)
        now = offsets[partition]
        first = first_offset(plan.start, now.low, resolved_at, partition)
        skipped = 0
        if first < now.low:
            if fail_on_data_loss:
                raise IngestError(
                    f"Kafka topic {topic} partition {partition}: offsets {first} to {now.low - 1} were deleted "
                    "(retention) before the ingest read them. Nothing was written past them; to skip them and go "
                    "on from the first kept offset, run the ingest with fail_on_data_loss=False "
                    "(--no-fail-on-data-loss)."
                )
            first, skipped = now.low, now.low - first
        end = min(now.high, first + per_partition)
        if end > first or skipped:
            ranges[plan.shard_id] = OffsetRange(partition, first, end, end < now.high, skipped)
    return ranges


def kafka_arrow(
    options: ReadOptions, plans: Mapping[int, shard_plan.ShardPlan], ranges: Mapping[int, OffsetRange]
) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` runs over the Kafka source's rows: records in, the ingest's rows out.

    A task's rows come one topic partition's range at a time, in offset order (the Kafka source makes
    one Spark partition per topic partition); the meta row of each partition the task saw comes last.
    """

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        schema = arrow_schema()
        makers: dict[int, RecordRows] = {}
        chunk: list[tuple] = []
        for batch in batches:
            columns = [batch.column(name).to_pylist() for name in KAFKA_COLUMNS]
            for partition, offset, key, value, timestamp in zip(*columns, strict=True):
                rows = makers.get(partition)
                if rows is None:
                    rows = makers[partition] = RecordRows(plans[partition], options, ReadStats(partition_id(partition)))
                chunk.extend(_record_rows(rows, str(offset), key, value or b"", timestamp, options))
                if len(chunk) >= ARROW_CHUNK_ROWS:
                    yield record_batch(chunk, schema, options.batch_id, options.ingest_ts)
                    chunk = []
        for partition, rows in makers.items():
            _finish(rows.stats, ranges[partition])
            chunk.append(rows.meta_row())
        if chunk:
            yield record_batch(chunk, schema, options.batch_id, options.ingest_ts)

    return run


def _record_rows(
    rows: RecordRows, offset: str, key: bytes | None, value: bytes, timestamp: datetime | None, options: ReadOptions
) -> Iterator[tuple]:
    """The rows of one Kafka record: its archive row (when on), then one per user record it carries."""
    stats = rows.stats
    partition_key = key.decode("utf-8", errors="replace") if key is not None else None
    if stats.first_arrival is None and timestamp is not None:
        stats.first_arrival = timestamp.timestamp()
    if timestamp is not None:
        stats.last_arrival = timestamp.timestamp()
    if options.archive and pos.sequence_key(offset) > pos.sequence_key(rows.plan.archive_committed):
        stats.archived += 1
        yield ("raw", stats.shard_id, offset, partition_key, timestamp, *(None,) * 8, value, *(None,) * 5)
    if not value or value[0] not in SPECIAL_FIRST_BYTES or not needs_decoding(value):
        stats.read += 1
        row = rows.row(offset, None, partition_key, timestamp, value, value, None)
        if row is not None:
            yield row
        return
    parts = expand_record(value, partition_key, options.max_event_bytes)
    stats.aggregated += parts[0].sub is not None
    for part in parts:
        stats.read += 1
        row = rows.row(offset, part.sub, part.partition_key, timestamp, part.raw, part.payload, part.rejection)
        if row is not None:
            yield row


def _finish(stats: ReadStats, planned: OffsetRange) -> None:
    """A partition's stats once its range is read: it ends where the range ends, whatever it held."""
    stats.last_sequence = str(planned.end - 1) if planned.end > 0 else None
    stats.capped = planned.capped
    stats.lost = planned.skipped
    stats.millis_behind = None if planned.capped else 0


def merged_stats(collected: Iterable[ReadStats], ranges: Mapping[str, OffsetRange]) -> list[ReadStats]:
    """One :class:`ReadStats` per planned partition: a range without records (a transaction's markers,
    or records deleted and skipped) still ends where planned.

    Raises:
        IngestError: If two tasks read one partition (the Kafka source splits a partition only when
            asked to, by ``minPartitions``, which this read never sets; the digests of a task's events
            are in its emission order, so two tasks' would not add up).
    """
    by_shard: dict[str, ReadStats] = {}
    for stats in collected:
        if stats.shard_id in by_shard:
            raise IngestError(f"Kafka partition {partition_number(stats.shard_id)} was read by two tasks in one batch")
        by_shard[stats.shard_id] = stats
    merged = []
    for shard, planned in ranges.items():
        stats = by_shard.get(shard) or ReadStats(shard)
        _finish(stats, planned)
        merged.append(stats)
    return merged


def offsets_json(topic: str, offsets: Mapping[int, int]) -> str:
    """Per-partition offsets as Spark's Kafka source takes them: ``{"topic": {"0": 12, "1": 40}}``."""
    return json.dumps({topic: {str(partition): offset for partition, offset in sorted(offsets.items())}})


class PartitionSource:
    """Plans and reads batches from one Kafka topic, with Spark's Kafka source (see the module docstring).

    It offers what the ingest query asks of a source (:class:`~icestream.ingest.reading.planner.ShardSource`
    is the Kinesis one): ``stream_created``, ``next_read``, ``keep_iterators``, ``prefetch``, ``reset``
    and ``close``.
    """

    def __init__(
        self,
        spark: SparkSession,
        connection: KafkaConnection,
        options: IngestOptions,
        stop: threading.Event,
        fault: Callable[[str, int], None],
        explain_read_failure: Callable[[BaseException], None],
    ) -> None:
        """Find the topic and fix where partitions without a position start.

        Raises:
            ConfigError: If the topic does not exist.
            ServiceUnavailableError: If Kafka does not answer.
        """
        self.spark = spark
        self.connection = connection
        self.topic = connection.topic
        self.options = options
        self._stop = stop
        self._fault = fault
        self._explain_read_failure = explain_read_failure
        self.stream_created = topics.incarnation(connection)  # the topic's id: one topic of a name from the next
        started_at = datetime.now(UTC)
        if options.starting_position == "trim_horizon":
            self.start_position = pos.TRIM_HORIZON
        else:  # latest is fixed once, as the query's start time, so every batch means the same place
            moment = started_at if options.starting_position == "latest" else options.starting_timestamp
            assert moment is not None  # IngestOptions.validated requires it for at_timestamp
            self.start_position = pos.at_timestamp(moment)
        self._resolved_at: dict[int, int] = {}  # per partition, the offset the start time resolved to
        fixed = options.max_records_per_shard
        self._cap = DEFAULT_RECORDS_PER_SHARD if fixed is None else fixed
        self._batch_cap = options.max_records_per_batch or DEFAULT_RECORDS_PER_BATCH

    def next_read(self, batch_id: int, processed: TablePositions, committed: TablePositions) -> ReadBatch | None:
        """Batch ``batch_id``'s read, or None when no partition has a record past its position."""
        began = time.monotonic()
        offsets = topics.offsets(self.connection)
        listing = [{"ShardId": partition_id(partition)} for partition in offsets]
        plans = [
            with_committed(plan, committed)
            for plan in shard_plan.plan_shards(listing, processed.events, processed.rejects, self.start_position)
        ]
        self._resolve_start(plans)
        share = shard_share(self._cap, self._batch_cap, len(plans))
        ranges = plan_ranges(plans, offsets, self._resolved_at, share, self.options.fail_on_data_loss, self.topic)
        if not ranges:
            return None
        plan_seconds = time.monotonic() - began
        read_plans = [plan for plan in plans if plan.shard_id in ranges]
        return replace(self._read(listing, read_plans, ranges, batch_id), plan_seconds=plan_seconds)

    def _resolve_start(self, plans: list[shard_plan.ShardPlan]) -> None:
        """Resolve an ``AT_TIMESTAMP`` start to offsets once per partition (the same offsets on every retry)."""
        waiting = [
            partition_number(plan.shard_id)
            for plan in plans
            if plan.start.startswith("AT_TIMESTAMP:") and partition_number(plan.shard_id) not in self._resolved_at
        ]
        if waiting:
            moment = float(self.start_position.split(":", 1)[1])
            self._resolved_at |= topics.offsets_at(self.connection, moment, waiting)

    def _read(
        self,
        listing: list[dict[str, Any]],
        plans: list[shard_plan.ShardPlan],
        ranges: dict[str, OffsetRange],
        batch_id: int,
    ) -> ReadBatch:
        self._fault("before_read", batch_id)
        began = time.monotonic()
        ingest_ts = datetime.now(UTC)
        read_options = ReadOptions(
            connection=None,
            stream_name=self.topic,
            batch_id=batch_id,
            ingest_ts=ingest_ts,
            **self.options.row_options(),
        )
        by_partition = {partition_number(plan.shard_id): plan for plan in plans}
        numbered = {planned.partition: planned for planned in ranges.values()}
        rows = self._rows(read_options, by_partition, numbered).localCheckpoint(eager=False)
        try:
            collected = rows.where("kind = 'meta'").select("meta", "raw_data").collect()
        except BaseException as error:
            release_rows(rows)
            self._explain_read_failure(error)
            raise
        shards = merged_stats((ReadStats.from_json(row.meta) for row in collected), ranges)
        packed = {json.loads(row.meta)["shard_id"]: bytes(row.raw_data or b"") for row in collected}
        return ReadBatch(
            batch_id, listing, plans, rows, shards, packed, ingest_ts, read_seconds=time.monotonic() - began
        )

    def _rows(
        self, options: ReadOptions, plans: Mapping[int, shard_plan.ShardPlan], ranges: Mapping[int, OffsetRange]
    ) -> DataFrame:
        """Spark's Kafka source over exactly the planned ranges, turned into the ingest's rows."""
        reading = {partition: planned for partition, planned in ranges.items() if planned.end > planned.first}
        if not reading:  # only skipped records: nothing to read, the positions still move on
            return self.spark.createDataFrame([], row_schema())
        records = (
            self.spark.read.format("kafka")
            .options(**self.connection.spark_options())
            .option("assign", json.dumps({self.topic: sorted(reading)}))
            .option("startingOffsets", offsets_json(self.topic, {p: r.first for p, r in reading.items()}))
            .option("endingOffsets", offsets_json(self.topic, {p: r.end for p, r in reading.items()}))
            .option("failOnDataLoss", "true")  # the ranges were checked against retention when planned
            .load()
            .select(*KAFKA_COLUMNS)
        )
        return map_in_arrow(records, kafka_arrow(options, plans, ranges), row_schema())

    # What the query asks of every source; the Kinesis source's iterators and read-ahead have no
    # counterpart here (Spark's Kafka source keeps its consumers on the executors).

    def keep_iterators(self, read: ReadBatch, positions: dict[str, str]) -> None:
        """Nothing to keep: the next batch asks the topic's offsets again."""

    def prefetch(self, done: ReadBatch, positions: dict[str, str], committed: TablePositions) -> None:
        """No read-ahead on Kafka."""

    def reset(self) -> None:
        """Nothing read ahead to forget."""

    def close(self) -> None:
        """Nothing to end."""
