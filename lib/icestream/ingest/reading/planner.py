"""The ingest's source side: which shards to read and from where, and the Spark read job.

:class:`ShardSource` plans a batch (``shard_plan.plan_shards``: a child shard waits until its
parents are read to the end) and runs one Spark job (:mod:`~icestream.ingest.reading.spark_job`: the shards
spread over the tasks the session runs at once, or ``shards_per_task`` each), which keeps the rows
in Spark's block store and collects one small meta row per shard
(:class:`~icestream.ingest.reading.read_stats.ReadStats`). Everything after works on the kept rows,
restricted to the sequence range the first read reported (:meth:`ReadBatch.kept`), so a batch's
records are read from Kinesis once and a recomputed stage sees exactly the same records.

It also carries shard iterators from one batch to the next (each saves a GetShardIterator call)
and, during a backlog, reads the next batch ahead while this one commits (``prefetch``).

At the tip (the last read ended there, nothing capped) a batch is read on the driver instead
(:mod:`~icestream.ingest.reading.driver_read`): its append is then its only Spark job.

A caught-up stream costs no Spark job at all: after a read that left every shard at its tip, the
next trigger first asks Kinesis from the driver (:class:`~icestream.ingest.gate.TriggerGate`: one
ListShards, and GetRecords from a probe iterator per shard) and reads only when enough arrived (one
record, or ``min_records``; after ``max_trigger_delay_seconds`` one record), or the shards changed.
Spark's own sources skip a batch the same way when their offsets have not moved.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from icestream.errors import ConfigError, IngestError, ServiceUnavailableError
from icestream.ingest import positions as pos
from icestream.ingest.gate import ITERATOR_REUSE_SECONDS, TriggerGate
from icestream.ingest.options import IngestOptions
from icestream.ingest.reading import shard_plan
from icestream.ingest.reading.driver_read import TIP_RECORDS_PER_SHARD, read_on_driver
from icestream.ingest.reading.read_stats import ReadStats
from icestream.ingest.reading.shard_reader import ReadOptions
from icestream.ingest.reading.spark_job import (
    read_task_count,
    read_with_spark,
    release_rows,
    session_task_slots,
    shard_share,
    within_ends,
)
from icestream.kinesis.clients import list_shards
from icestream.limits import DEFAULT_RECORDS_PER_BATCH, DEFAULT_RECORDS_PER_SHARD

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from icestream.kinesis.clients import KinesisConnection

# Spark scheduler pools (they matter under spark.scheduler.mode FAIR, which local sessions use):
# a free task slot goes to the pool with the fewest running tasks, so a batch's one-task writes
# start as soon as a slot frees instead of queueing behind every task of the next batch's read.
SCHEDULER_POOLS = {"batch": "icestream-ingest", "read_ahead": "icestream-read-ahead"}
# A Kinesis shard's id, or a Kafka topic partition's as the Kafka read names it (kafka_read.partition_id).
SHARD_ID = re.compile(r"(shardId|partition)-\d{12}")


@dataclass
class TablePositions:
    """Per-shard positions of the two tables the ingest writes (after a crash they may differ)."""

    events: dict[str, str] = field(default_factory=dict)
    rejects: dict[str, str] = field(default_factory=dict)
    # The raw archive's (when on): it commits first, so it is never behind; it only decides which
    # records still need archiving, never where reading starts.
    archive: dict[str, str] = field(default_factory=dict)
    # Per shard, the aggregates the rejects' or a routed table's position ends inside (ShardPlan.inside).
    inside: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def same(cls, positions: dict[str, str]) -> TablePositions:
        """Both tables at ``positions`` (after a batch that committed, or skipped, both)."""
        return cls(dict(positions), dict(positions))


@dataclass(frozen=True)
class ReadBatch:
    """A finished read phase: the kept rows and what each shard's task reported."""

    batch_id: int
    listing: list[dict[str, Any]]  # the ListShards records it was planned from
    plans: list[shard_plan.ShardPlan]
    # The event, reject and meta rows, kept once read: ``localCheckpoint``, Spark's row blocks in
    # memory (spilling to disk), measured 13 % less CPU per batch than its columnar cache, which
    # converts every row into column buffers and back for the writes. Its one difference: a lost
    # block (an executor gone) fails the batch instead of re-reading; the batch is then retried
    # from the tables' positions, like any failed batch, so nothing is lost or written twice.
    rows: DataFrame
    shards: list[ReadStats]
    packed: dict[str, bytes]  # shard -> its new events' digests (dedupe.Packer), when dedupe is on
    ingest_ts: datetime  # when the read began: every row's ingest_ts
    read_seconds: float
    plan_seconds: float = 0.0
    prefetched: bool = False  # read while the previous batch committed
    on_driver: bool = False  # read at the tip by the driver, without a Spark job (tip_read)

    @property
    def records(self) -> int:
        """Records read, over all shards."""
        return sum(stats.read for stats in self.shards)

    @property
    def any_finished(self) -> bool:
        """Some shard was read to its end (its children become readable)."""
        return any(stats.finished for stats in self.shards)

    @property
    def capped(self) -> bool:
        """Some shard hit its cap: a backlog is known to wait."""
        return any(stats.capped for stats in self.shards)

    def advance(self, positions: dict[str, str]) -> dict[str, str]:
        """``positions`` moved past what this read covered."""
        advanced = dict(positions)
        by_shard = {stats.shard_id: stats for stats in self.shards}
        for plan in self.plans:
            stats = by_shard[plan.shard_id]
            if stats.finished:
                advanced[plan.shard_id] = pos.ended(stats.last_sequence or pos.last_sequence(plan.start))
            elif stats.last_sequence:
                advanced[plan.shard_id] = pos.after(stats.last_sequence, stats.last_sub)
            else:
                advanced.setdefault(plan.shard_id, plan.start)
        return advanced

    def kept(self, kind: str) -> DataFrame:
        """The kept ``event``, ``reject`` or ``raw`` (archive) rows, within what the first read reported.

        A read task run twice (a retried task) may read further than its first attempt did; the
        range predicate makes it yield exactly the records the meta rows describe.
        """
        for stats in self.shards:
            # Shard ids come from ListShards (or a topic's partitions); they reach SQL text only in one format.
            if not SHARD_ID.fullmatch(stats.shard_id):
                raise IngestError(f"unexpected shard id {stats.shard_id!r}")
        ends = {stats.shard_id: stats.last_sequence for stats in self.shards if stats.last_sequence}
        return self.rows.where(f"kind = '{kind}' AND ({within_ends(ends)})")

    def unpersist(self) -> None:
        """Free the kept rows (a read on the driver kept none: its rows go when its plan goes)."""
        if not self.on_driver:
            release_rows(self.rows)


def with_committed(plan: shard_plan.ShardPlan, committed: TablePositions) -> shard_plan.ShardPlan:
    """``plan`` with what each table committed of its shard: the records up to there are replayed, not written."""
    return replace(
        plan,
        events_committed=pos.committed_mark(committed.events.get(plan.shard_id)),
        rejects_committed=pos.committed_mark(committed.rejects.get(plan.shard_id)),
        archive_committed=pos.last_sequence(committed.archive.get(plan.shard_id)),
        inside=committed.inside.get(plan.shard_id, ()),
    )


class ShardSource:
    """Plans and reads batches from one Kinesis stream (see the module docstring)."""

    def __init__(
        self,
        spark: SparkSession,
        stream_name: str,
        connection: KinesisConnection,
        options: IngestOptions,
        stop: threading.Event,
        fault: Callable[[str, int], None],
        explain_read_failure: Callable[[BaseException], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Describe the stream and fix where shards without a position start.

        Args:
            spark: The session.
            stream_name: The Kinesis stream it reads.
            connection: How to reach Kinesis (resolved once by the caller; read tasks get it too).
            options: The query's options.
            stop: Set when the query stops (no read-ahead is started then).
            fault: Called with ``("before_read", batch_id)`` (tests simulate crashes there).
            explain_read_failure: Called with what a failed read job raised; raises one clear error instead
                when the executors could not run it (their Python lacks icestream: see runtime.shipping).
            clock: Monotonic seconds for the trigger gate's delay (tests pass their own).

        Raises:
            ConfigError: If the stream does not exist.
            ServiceUnavailableError: If Kinesis does not answer.
        """
        self.spark = spark
        self.stream_name = stream_name
        self.options = options
        self._stop = stop
        self._fault = fault
        self._explain_read_failure = explain_read_failure
        self._connection = connection
        self._client = self._connection.client()
        self.stream_created = self._describe_stream()
        self.start_position = self._resolve_start(datetime.now(UTC))
        self._iterators: dict[str, tuple[str, str, float]] = {}  # shard -> (iterator, its position, when)
        # AvailableNow drains what is there and stops: holding a batch back would only end it early.
        min_records = None if options.available_now else options.min_records
        self._gate = TriggerGate(min_records, options.max_trigger_delay_seconds, clock)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="icestream-prefetch")
        self._tip_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="icestream-tip-read")
        self._at_tip = False  # the last read left every shard at its tip: the next is read on the driver
        self._prefetched: Future[ReadBatch] | None = None
        self._parallelism: int | None = None  # spark.default.parallelism, once a read job needs it
        fixed = options.max_records_per_shard
        self._cap = DEFAULT_RECORDS_PER_SHARD if fixed is None else fixed  # records per shard and batch
        self._batch_cap = options.max_records_per_batch or DEFAULT_RECORDS_PER_BATCH  # over all shards

    def _describe_stream(self) -> str:
        """The stream's creation time (epoch seconds as text): it tells one incarnation from another."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            summary = self._client.describe_stream_summary(StreamName=self.stream_name)
        except ClientError as error:
            if "ResourceNotFound" in str(error):
                raise ConfigError(
                    f"Stream {self.stream_name} does not exist. Create it with `icestream setup`."
                ) from None
            raise ServiceUnavailableError(f"Kinesis did not describe {self.stream_name}: {error}") from None
        except BotoCoreError as error:
            raise ServiceUnavailableError(f"Kinesis does not answer ({error}). Check `icestream doctor`.") from None
        return f"{summary['StreamDescriptionSummary']['StreamCreationTimestamp'].timestamp():.3f}"

    def _resolve_start(self, started_at: datetime) -> str:
        if self.options.starting_position == "trim_horizon":
            return pos.TRIM_HORIZON
        if self.options.starting_position == "latest":
            # LATEST is fixed once, as the query's start time, so every batch means the same place.
            return pos.at_timestamp(started_at)
        assert self.options.starting_timestamp is not None  # IngestOptions.validated requires it for at_timestamp
        return pos.at_timestamp(self.options.starting_timestamp)

    # -- planning and reading -----------------------------------------------------------------------

    def plan(
        self,
        listing: list[dict[str, Any]],
        processed: TablePositions,
        committed: TablePositions,
        iterators: dict[str, tuple[str, str]],
    ) -> list[shard_plan.ShardPlan]:
        """Shard plans from both tables' positions, with thresholds and any iterator that fits.

        Args:
            listing: ListShards records.
            processed: Where each table's reading has got to.
            committed: What each table committed (records up to there are replayed, not written).
            iterators: Shard → (iterator, the position it continues from); used only when that
                position is exactly where the plan starts.

        Returns:
            One plan per shard to read now.
        """
        plans = shard_plan.plan_shards(listing, processed.events, processed.rejects, self.start_position)
        return [
            replace(
                with_committed(plan, committed),
                iterator=iterators[plan.shard_id][0]
                if plan.shard_id in iterators and iterators[plan.shard_id][1] == plan.start
                else None,
            )
            for plan in plans
        ]

    def next_read(self, batch_id: int, processed: TablePositions, committed: TablePositions) -> ReadBatch | None:
        """Batch ``batch_id``'s read: the one read ahead if it still fits, else plan and read now.

        Returns:
            The read, or None when no shard is readable (all finished, or waiting for parents).
        """
        began = time.monotonic()
        ahead = self._take_prefetched(batch_id, processed)
        if ahead is not None:
            return ahead
        if self._gate.armed and self._gate.hold(self._client, self.stream_name):
            self._renew(self._gate.untouched())
            return None
        listing = list_shards(self._client, self.stream_name)
        now = time.monotonic()
        iterators = {
            shard: (iterator, position)
            for shard, (iterator, position, when) in self._iterators.items()
            if now - when < ITERATOR_REUSE_SECONDS
        }
        plans = self.plan(listing, processed, committed, iterators)
        plan_seconds = time.monotonic() - began
        if not plans:
            return None
        self._gate.read_started()
        on_driver = self._at_tip and self.options.tip_on_driver
        return replace(self._read(listing, plans, batch_id, on_driver), plan_seconds=plan_seconds)

    def _read(
        self, listing: list[dict[str, Any]], plans: list[shard_plan.ShardPlan], batch_id: int, on_driver: bool = False
    ) -> ReadBatch:
        """The read phase: on the driver at the tip, else one Spark job (rows kept, a meta row per shard collected)."""
        self._fault("before_read", batch_id)
        began = time.monotonic()
        ingest_ts = datetime.now(UTC)
        cap = shard_share(self._cap, self._batch_cap, len(plans))
        read_options = ReadOptions(
            connection=self._connection,
            stream_name=self.stream_name,
            max_records=min(cap, TIP_RECORDS_PER_SHARD) if on_driver else cap,
            pooled_cap=None if on_driver else self._cap,  # a task's shards share their records (side_by_side)
            batch_id=batch_id,
            ingest_ts=ingest_ts,
            **self.options.row_options(),
            **self.options.read_options,
        )
        if on_driver:
            rows, collected = read_on_driver(self.spark, read_options, plans, self._tip_pool)
        else:
            rows, collected = self._read_with_spark(read_options, plans)
        shards = [ReadStats.from_json(meta) for meta, _ in collected]
        packed = {stats.shard_id: digests for stats, (_, digests) in zip(shards, collected, strict=True)}
        return ReadBatch(
            batch_id,
            listing,
            plans,
            rows,
            shards,
            packed,
            ingest_ts,
            read_seconds=time.monotonic() - began,
            on_driver=on_driver,
        )

    def _read_with_spark(
        self, read_options: ReadOptions, plans: list[shard_plan.ShardPlan]
    ) -> tuple[DataFrame, list[tuple[str, bytes]]]:
        """One Spark job reads every shard and keeps the rows; returns them and the meta rows' (meta, digests)."""
        tasks = read_task_count(len(plans), self.options.shards_per_task, self._cores())
        return read_with_spark(self.spark, read_options, plans, tasks, self._explain_read_failure)

    def _cores(self) -> int:
        """The tasks the session runs at once (``read_job.session_task_slots``), asked of the JVM once."""
        if self._parallelism is None:
            self._parallelism = session_task_slots(self.spark)
        return self._parallelism

    def keep_iterators(self, read: ReadBatch, positions: dict[str, str]) -> None:
        """Remember where each shard's iterator continues, for the next batch; and arm the gate.

        The gate asks Kinesis first at the next trigger when the read left every shard at its tip:
        after a read that found nothing new, or, when batches wait for ``min_records``, after any.
        """
        now = time.monotonic()
        for stats in read.shards:
            if stats.next_iterator and not stats.finished:
                self._iterators[stats.shard_id] = (stats.next_iterator, positions[stats.shard_id], now)
            else:
                self._iterators.pop(stats.shard_id, None)
        at_tip = (
            bool(read.shards)
            and not read.any_finished
            and not read.capped
            and all(stats.next_iterator and stats.millis_behind in (0, None) for stats in read.shards)
        )
        self._at_tip = at_tip
        if at_tip and (read.records == 0 or self._gate.holds_back):
            iterators = {stats.shard_id: stats.next_iterator for stats in read.shards if stats.next_iterator}
            self._gate.arm(read.listing, iterators)
        else:
            self._gate.disarm()

    def _renew(self, iterators: dict[str, str]) -> None:
        """Replace kept iterators by probe iterators at the same position (their lifetime starts again)."""
        now = time.monotonic()
        for shard, iterator in iterators.items():
            if shard in self._iterators:
                self._iterators[shard] = (iterator, self._iterators[shard][1], now)

    # -- reading ahead ------------------------------------------------------------------------------

    def prefetch(self, done: ReadBatch, positions: dict[str, str], committed: TablePositions) -> None:
        """Start the next batch's read while this batch dedupes and commits, when more data waits.

        Only after a batch that hit its records-per-shard cap (a backlog is known to be there) and
        in which no shard ended (that would change which shards are readable): a caught-up stream
        keeps the processing-time trigger exactly. Nothing is committed by a prefetch; if this batch
        fails, the prefetched read is thrown away and the next batch plans from the tables.
        """
        if not self.options.prefetch or not done.capped or done.any_finished or self._stop.is_set():
            return
        iterators = {
            stats.shard_id: (stats.next_iterator, positions[stats.shard_id])
            for stats in done.shards
            if stats.next_iterator
        }
        plans = self.plan(done.listing, TablePositions.same(positions), committed, iterators)
        if plans:
            self._prefetched = self._pool.submit(self._read_ahead, done.listing, plans, done.batch_id + 1)

    def _read_ahead(self, listing: list[dict[str, Any]], plans: list[shard_plan.ShardPlan], batch_id: int) -> ReadBatch:
        """The prefetch thread's read, in its own scheduler pool (see SCHEDULER_POOLS)."""
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", SCHEDULER_POOLS["read_ahead"])
        return self._read(listing, plans, batch_id)

    def _take_prefetched(self, batch_id: int, processed: TablePositions) -> ReadBatch | None:
        if self._prefetched is None:
            return None
        future, self._prefetched = self._prefetched, None
        read = future.result()  # a failure of the prefetched read is this batch's failure
        planned = shard_plan.plan_shards(read.listing, processed.events, processed.rejects, self.start_position)
        expected = {plan.shard_id: plan.start for plan in planned}
        if read.batch_id != batch_id or {plan.shard_id: plan.start for plan in read.plans} != expected:
            read.unpersist()  # planned from positions that did not hold: read again
            return None
        return replace(read, prefetched=True)

    def _discard_prefetched(self) -> None:
        if self._prefetched is not None:
            future, self._prefetched = self._prefetched, None
            with contextlib.suppress(BaseException):
                future.result().unpersist()

    def reset(self) -> None:
        """Forget iterators and any read ahead: after a failure only the tables count."""
        self._iterators.clear()
        self._at_tip = False
        self._gate.disarm()
        self._discard_prefetched()

    def close(self) -> None:
        """Drop any read ahead and end the prefetch thread."""
        self._discard_prefetched()
        self._pool.shutdown(wait=True)
        self._tip_pool.shutdown(wait=True)
