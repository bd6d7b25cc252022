"""The streaming ingest: an exactly-once micro-batch query from Kinesis into Iceberg, on Spark.

Designed like Spark's Kafka source and Iceberg's Flink / Kafka Connect sinks, and split the way
Spark splits a ``StreamingQuery`` handle from its engine. Each batch:

1. **plan** and **read** (:mod:`~icestream.ingest.reading.planner`): list the shards, pick the ones to read
   now and from where, and read them in one Spark job (one task per shard), rows kept;
2. **dedupe**, **write** and **commit** (:mod:`~icestream.ingest.sink`): the rejects, then the
   events, each commit carrying the new per-shard positions in its snapshot summary;
3. **report** (:mod:`~icestream.ingest.progress`): one typed :class:`BatchProgress`, kept in
   ``recent_progress`` and written as one JSON line to ``<run_dir>/ingest_progress.jsonl``.

A batch that fails transiently is retried from what the tables committed; any other failure
stops the query at once (:mod:`~icestream.ingest.batch_retry`).

``start_ingest(...)`` returns an :class:`IngestQuery`, a handle shaped like Spark's
``StreamingQuery``: ``status``, ``last_progress``, ``recent_progress``, ``await_termination`` and
``stop``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from icestream.config import Settings, load_settings
from icestream.errors import IcestreamError, IngestError, InjectedFaultError
from icestream.ingest.batch_retry import run_with_retries
from icestream.ingest.lease import Lease
from icestream.ingest.options import IngestOptions, ingest_options
from icestream.ingest.progress import PROGRESS_FILE, BatchProgress, ProgressLog
from icestream.ingest.reading.kafka_read import PartitionSource, stream_label
from icestream.ingest.reading.planner import SCHEDULER_POOLS, ShardSource, TablePositions
from icestream.ingest.sink import SinkTables, TableSink
from icestream.kafka.connection import kafka_connection
from icestream.kinesis.clients import kinesis_connection
from icestream.lake.continuous_aggregate import METRICS_HOLDER, create_metrics_table, refresh_metrics
from icestream.lake.ddl import create_archive_table, create_namespace, create_rejects_table
from icestream.lake.keyed import create_keyed_table
from icestream.runtime.handles import heap_mib
from icestream.runtime.shipping import raise_if_executor_import_failed
from icestream.validation import check_writable_folders

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class IngestQuery:
    """A running (or finished) ingest query; create it with :func:`start_ingest`."""

    def __init__(self, parts: IngestParts) -> None:
        """Take the parts :func:`build_ingest` made; nothing runs until :meth:`start`."""
        self.spark = parts.spark
        self.settings = parts.settings
        self.options = parts.options
        self.id = parts.query_id
        self.progress_file = self.options.progress_file or self.settings.path("run_dir") / PROGRESS_FILE
        self._log = ProgressLog(self.progress_file, self.options.on_progress)
        self._stop = parts.stop
        self._thread: threading.Thread | None = None
        self._exception: BaseException | None = None
        self._status: dict[str, Any] = {"message": "Initializing", "isDataAvailable": False, "isTriggerActive": False}
        self.source = parts.source
        self.sink = parts.sink
        self.table_lease = parts.lease  # one ingest per table (fencing)
        self.metrics_lease = parts.metrics_lease  # and one refresher of its metrics table (with --metrics)
        self._metrics_behind = parts.metrics_lease is not None  # refresh before the first batch too
        self.processed = TablePositions()  # where reading has got to, per table
        self.recovered_from: dict[str, str] = {}
        self.next_batch_id = 0
        self._batches_run = 0
        self._last_batch_began: float | None = None

    # -- the handle ---------------------------------------------------------------------------------

    @property
    def status(self) -> dict[str, Any]:
        """What the query is doing now (``message``, ``isDataAvailable``, ``isTriggerActive``)."""
        return dict(self._status)

    @property
    def recent_progress(self) -> deque[dict[str, Any]]:
        """Progress of the latest batches (up to 100), oldest first (keys: see ``BatchProgress.as_dict``)."""
        return self._log.recent

    @property
    def last_progress(self) -> dict[str, Any] | None:
        """Progress of the most recent batch, or None before the first."""
        recent = self._log.recent
        return recent[-1] if recent else None

    @property
    def is_active(self) -> bool:
        """True while the query runs."""
        return self._thread is not None and self._thread.is_alive()

    def exception(self) -> BaseException | None:
        """The error that stopped the query, if any."""
        return self._exception

    def start(self) -> IngestQuery:
        """Start the query in a background thread; returns at once."""
        self._acquire_leases()
        self._thread = threading.Thread(target=self._run, name=f"icestream-ingest-{self.id[:8]}", daemon=True)
        self._thread.start()
        return self

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait for the query to stop.

        Args:
            timeout: Seconds to wait (None: until it stops).

        Returns:
            True if it stopped, False if the timeout passed first.

        Raises:
            IngestError: If the query stopped because of an error.
        """
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return False
        if self._exception is not None:
            if isinstance(self._exception, IcestreamError):
                raise self._exception
            hint = ""
            if type(self._exception).__module__.startswith(("botocore", "urllib3")):
                hint = " Is Kinesis reachable? Check `icestream emulator status` or `icestream doctor`."
            raise IngestError(f"The ingest query failed: {type(self._exception).__name__}: {self._exception}.{hint}")
        return True

    def stop(self, timeout: float | None = 120.0) -> None:
        """Stop gracefully: the batch under way finishes and commits, then the query ends.

        A wait (for the next trigger, or before retrying a failed batch) ends at once.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # The fencing hooks: one ingest per table at a time. Acquiring runs in start() (a refusal raises to
    # the caller, before any thread starts), renewing before every batch, releasing when the loop ends,
    # whatever ended it. A lost lease (expired, then taken by another ingest) raises from renew: the
    # query stops before it writes again (see icestream.ingest.lease).

    def _acquire_leases(self) -> None:
        self.table_lease.acquire()
        if self.metrics_lease is not None:
            try:
                self.metrics_lease.acquire()
            except BaseException:
                self.table_lease.release()  # refused: leave the events table free as found
                raise

    def _renew_leases(self) -> None:
        self.table_lease.renew()
        if self.metrics_lease is not None:
            self.metrics_lease.renew()

    def _release_leases(self) -> None:
        self.table_lease.release()
        if self.metrics_lease is not None:
            self.metrics_lease.release()

    # -- the loop -----------------------------------------------------------------------------------

    def _recover(self) -> None:
        """Load what both tables committed: the start path, also used before a batch retry."""
        recovered = self.sink.recover()
        self.processed = recovered.processed
        self.recovered_from = recovered.sources
        self.next_batch_id = recovered.next_batch_id
        self.source.reset()  # iterators and any read ahead: only what the tables say counts
        self._metrics_behind = self.metrics_lease is not None

    def _refresh_metrics(self, progress: BatchProgress | None) -> None:
        """Fold what the events table committed into its metrics table (see icestream.lake.continuous_aggregate).

        A crash between the events commit and this refresh leaves the metrics behind, never wrong:
        the next refresh (after a restart, a retry, or the next batch) folds the rest.
        """
        began = time.monotonic()
        refresh = refresh_metrics(self.spark, self.settings.table_name, self.settings.metrics_table_name)
        self._metrics_behind = False
        if progress is not None:
            progress.durations.metrics = time.monotonic() - began
            progress.metrics_snapshot_id = refresh.snapshot_id

    def _run(self) -> None:
        began = time.monotonic()
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", SCHEDULER_POOLS["batch"])
        try:
            self._recover()  # before marking: the marks say which stream incarnation the rows came from
            self.sink.mark_source()
            while not self._stop.is_set():
                if self.options.max_batches is not None and self._batches_run >= self.options.max_batches:
                    break
                elapsed = time.monotonic() - began
                if self.options.duration_seconds is not None and elapsed >= self.options.duration_seconds:
                    break
                tick = time.monotonic()
                self._status = {"message": "Processing new data", "isDataAvailable": True, "isTriggerActive": True}
                self._renew_leases()
                progress = run_with_retries(self._batch, self._recover, self.options.batch_retries, self._stop)
                if self.options.available_now:
                    if progress is None or progress.caught_up:
                        break
                    continue  # a drain runs its batches back to back, as Spark's availableNow trigger does
                self._status = {
                    "message": "Waiting for next trigger",
                    "isDataAvailable": progress is not None,
                    "isTriggerActive": False,
                }
                remaining = self.options.trigger_seconds - (time.monotonic() - tick)
                if self.options.duration_seconds is not None:
                    remaining = min(remaining, self.options.duration_seconds - (time.monotonic() - began))
                if remaining > 0:
                    self._stop.wait(remaining)
            if self._batches_run:
                # A table that got no rows in the last batches holds older positions; a restart would
                # read again from them. Stopping gracefully, every table says where the query stands,
                # in a job group of its own (the last batch's would count these jobs as that batch's).
                self.spark.sparkContext.setJobGroup(stop_job_group(self.id), "icestream stop: positions")
                self.sink.commit_positions(self.processed.events, self.next_batch_id - 1)
        except BaseException as error:  # noqa: BLE001 - kept and re-raised by await_termination
            self._exception = error
        finally:
            self.source.close()
            self._release_leases()
            self._status = {"message": "Stopped", "isDataAvailable": False, "isTriggerActive": False}

    def _fault(self, phase: str, batch_id: int) -> None:
        _inject_fault(self.options, phase, batch_id)

    def _batch(self) -> BatchProgress | None:
        """Run one batch; None when there was nothing new to commit (like Spark, no empty batch)."""
        batch_id = self.next_batch_id
        began = time.monotonic()
        progress = BatchProgress(self.id, batch_id, datetime.now(UTC))
        # Every Spark job of the batch is in its job group: the Spark UI shows them per batch.
        self.spark.sparkContext.setJobGroup(job_group(self.id, batch_id), f"icestream batch {batch_id}")
        read = self.source.next_read(batch_id, self.processed, self.sink.committed)
        if read is None:
            if self._metrics_behind:
                self._refresh_metrics(None)
            return None
        try:
            progress.shards, progress.capped, progress.prefetched = read.shards, read.capped, read.prefetched
            progress.on_driver = read.on_driver
            progress.ingest_ts = read.ingest_ts  # the rows' ingest_ts (report.freshness)
            progress.durations.plan, progress.durations.read = read.plan_seconds, read.read_seconds
            progress.durations.parse = sum(stats.parse_seconds for stats in read.shards)
            new_positions = read.advance(self.processed.events)
            if read.records == 0 and not read.any_finished:
                self.source.keep_iterators(read, new_positions)
                if self._metrics_behind:
                    self._refresh_metrics(None)
                return None  # nothing new (a shard reaching its end counts)
            self._fault("after_read", batch_id)
            self.source.prefetch(read, new_positions, self.sink.committed)
            self.sink.commit(read, new_positions, progress, self._fault)
            if self.metrics_lease is not None:
                self._fault("before_metrics", batch_id)
                self._refresh_metrics(progress)
        finally:
            read.unpersist()
        self.processed = TablePositions.same(new_positions)
        self.source.keep_iterators(read, new_positions)
        self.next_batch_id = batch_id + 1
        self._batches_run += 1
        now = time.monotonic()
        progress.durations.total = now - began
        progress.set_rates(began, now, self._last_batch_began)
        progress.driver_heap_mib = heap_mib(self.spark)  # what a batch keeps shows here (max_records_per_batch)
        self._last_batch_began = began
        self._log.record(progress)
        return progress


def job_group(query_id: str, batch_id: int) -> str:
    """The Spark job group of one batch's jobs (``SparkContext.statusTracker().getJobIdsForGroup``)."""
    return f"icestream-{query_id}-batch-{batch_id}"


def stop_job_group(query_id: str) -> str:
    """The Spark job group of the commits a graceful stop makes (positions of tables left behind)."""
    return f"icestream-{query_id}-stop"


def _inject_fault(options: IngestOptions, phase: str, batch_id: int) -> None:
    """Call the test's fault hook; what it raises is a simulated crash at ``phase``."""
    if options.fault_hook is None:
        return
    try:
        options.fault_hook(phase, batch_id)
    except Exception as error:
        raise InjectedFaultError(
            f"fault injected at {phase} of batch {batch_id}: {type(error).__name__}: {error}"
        ) from error


@dataclass(frozen=True)
class IngestParts:
    """What one ingest query is made of, built once, top-down, by :func:`build_ingest`."""

    spark: SparkSession
    settings: Settings
    options: IngestOptions  # validated
    query_id: str
    stop: threading.Event  # set to stop the query (the source stops reading ahead too)
    source: ShardSource | PartitionSource
    sink: TableSink
    lease: Lease
    metrics_lease: Lease | None = None  # with metrics: the metrics table's refresher


def build_ingest(spark: SparkSession, settings: Settings, options: IngestOptions) -> IngestQuery:
    """Build an ingest query top-down: settings, session, the stream's connection, then source, sink and lease.

    Everything the parts need is resolved here once and handed down (the Kinesis endpoint, the raw
    archive's table), so no part reaches back up for settings, sessions or tables of its own.

    Raises:
        ConfigError: For an invalid option, or a stream, topic or table that does not exist.
        ServiceUnavailableError: If Kinesis (or Kafka) does not answer.
    """
    options = options.validated()
    query_id = str(uuid.uuid4())
    stop = threading.Event()
    # An executor without icestream fails a read task: said in one line, with the ship mode to change.
    explain = partial(raise_if_executor_import_failed, settings=settings, master=spark.sparkContext.master)
    source: ShardSource | PartitionSource
    if options.source == "kafka":
        kafka = kafka_connection(settings)
        source = PartitionSource(spark, kafka, options, stop, partial(_inject_fault, options), explain)
        stream_name, stream_kind = stream_label(kafka.topic), f"Kafka topic {kafka.topic}"
    else:
        connection = kinesis_connection(settings)
        source = ShardSource(
            spark, settings.stream_name, connection, options, stop, partial(_inject_fault, options), explain
        )
        stream_name, stream_kind = settings.stream_name, f"Kinesis stream {settings.stream_name}"
    archive = create_archive_table(spark, settings) if options.archive else None  # optional: setup may predate it
    if options.changes is not None:  # a change stream's keyed table is declared by its options: made here
        create_namespace(spark, settings)
        comment = f"Entities by key, kept current from the changes on {stream_kind}"
        create_keyed_table(spark, settings.table_name, options.changes.keyed, comment, settings.changes_mode)
        create_rejects_table(spark, settings)
    tables = SinkTables(
        stream_name,
        settings.table_name,
        settings.rejects_table_name,
        archive,
        route_naming=settings if options.routing is not None else None,
    )
    sink = TableSink(spark, tables, options, query_id, source.stream_created)
    lease = Lease(spark, settings.table_name)
    metrics_lease = None
    if options.metrics:
        metrics = create_metrics_table(spark, settings.metrics_table_name, settings.table_name)
        metrics_lease = Lease(spark, metrics, holder=METRICS_HOLDER)
    return IngestQuery(IngestParts(spark, settings, options, query_id, stop, source, sink, lease, metrics_lease))


def start_ingest(spark: SparkSession | None = None, settings: Settings | None = None, **options: Any) -> IngestQuery:
    """Start the ingest query in the background and return its handle.

    Args:
        spark: The session (default: ``get_spark(settings)``).
        settings: The settings (default: ``load_settings()``).
        **options: Fields of :class:`IngestOptions` (``trigger_seconds``, ``available_now``, ...).

    Returns:
        The running query.

    Raises:
        ConfigError: For an invalid option, or a warehouse or run folder that cannot be written.
        ServiceUnavailableError: If Kinesis cannot be reached.
    """
    from icestream.runtime.spark import get_spark

    settings = settings or load_settings()
    checked = ingest_options(settings, **options).validated()  # before Spark starts: a bad option fails at once
    check_writable_folders(settings)  # the warehouse, and run_dir, where progress goes once a batch committed
    # A drain's JVM: C1 only (runtime.java_options). Only a change stream's ingest creates the namespace.
    spark = spark or get_spark(settings, drain=checked.available_now, creates_namespace=checked.changes is not None)
    return build_ingest(spark, settings, checked).start()
