"""The streaming ingest: an exactly-once micro-batch query from Kinesis into Iceberg, on Spark.

Designed like Spark's Kafka source and Iceberg's Flink / Kafka Connect sinks. Each batch:

1. **plan** (driver): list the shards, and pick the ones to read now, and from where
   (``positions.plan_shards``: a child shard waits until its parents are read to the end);
2. **read** (executors, one task per shard): GetRecords from the position up to
   ``max_records_per_shard``, parse, and keep the rows in Spark's cache; one small ``meta`` row per
   shard comes back to the driver. Everything after works on the cached rows, restricted to the
   sequence range the first read reported, so a batch's records are read from Kinesis once and a
   recomputed stage sees exactly the same records;
3. **dedupe** by ``event_id``: within a shard (in the task), across shards of the batch, and against
   rows already committed within ``dedupe_lookback`` of event time, on the driver from the digests
   the tasks report and an index of the committed ids (``dedupe.CommittedIndex``): no Spark job;
4. **write** the rejects, then the events, each with ``writeTo(...).append()``; the new per-shard
   positions ride in the snapshot summary of that same commit, so a table's data and its position
   can never disagree. A restart (or a batch retry) reloads both tables' positions, re-reads from
   the earlier of the two, and each table skips what it already holds: nothing is lost or written
   twice, whichever moment a crash hits.

``start_ingest(...)`` returns an :class:`IngestQuery`, a handle shaped like Spark's
``StreamingQuery``: ``status``, ``last_progress``, ``recent_progress``, ``await_termination`` and
``stop``. Progress also goes, one JSON line per batch, to ``<run_dir>/ingest_progress.jsonl``.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from icestream.clients import kinesis_connection, list_shards
from icestream.config import Settings, load_settings
from icestream.errors import ConfigError, IcestreamError, IngestError, ServiceUnavailableError
from icestream.ingest import dedupe
from icestream.ingest import positions as pos
from icestream.ingest.reader import ReadOptions, read_arrow, row_schema
from icestream.limits import DEFAULT_MAX_EVENT_BYTES, DEFAULT_START_POSITION, START_POSITIONS
from icestream.schema import REJECT_COLUMNS_DDL, table_columns
from icestream.shipping import raise_if_executor_import_failed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PHASES = ("before_read", "after_read", "between_commits", "after_commit")
# Rows one write task takes: a batch at the default cap (10,000 per shard) is one task per table.
# A hash shuffle first (the tables' own write.distribution-mode) cost about 0.2 s per batch here.
WRITE_ROWS_PER_TASK = 250_000
# Spark scheduler pools (they matter under spark.scheduler.mode FAIR, which local sessions use):
# a free task slot goes to the pool with the fewest running tasks, so a batch's one-task writes
# start as soon as a slot frees instead of queueing behind every task of the next batch's read.
SCHEDULER_POOLS = {"batch": "icestream-ingest", "read_ahead": "icestream-read-ahead"}
PROGRESS_FILE = "ingest_progress.jsonl"
ITERATOR_REUSE_SECONDS = 240.0
SHARD_ID = re.compile(r"shardId-\d{12}")  # Kinesis shard iterators expire after 5 minutes
REJECT_COLUMNS = tuple(column.split()[0] for column in REJECT_COLUMNS_DDL)


@dataclass(frozen=True)
class _Read:
    """A finished read phase: the cached rows and what each shard's task reported."""

    batch_id: int
    plans: list[Any]
    rows: Any  # a persisted DataFrame
    metas: list[dict[str, Any]]
    seconds: float
    packed: dict[str, bytes]  # shard -> its new events' digests (dedupe.Packer), when dedupe is on
    ingest_ts: datetime  # when the read began: every row's ingest_ts


@dataclass(frozen=True)
class IngestOptions:
    """How the ingest query runs. Every field is validated by :meth:`validated`."""

    trigger_seconds: float = 5.0  # processing-time trigger: a batch starts at most this often
    available_now: bool = False  # read what the stream holds now, commit, stop
    max_batches: int | None = None  # stop after this many batches
    duration_seconds: float | None = None  # stop after this long
    max_records_per_shard: int = 10_000
    starting_position: str = DEFAULT_START_POSITION  # for shards with no committed position
    starting_timestamp: datetime | None = None  # with starting_position "at_timestamp"
    dedupe: bool = True
    dedupe_lookback: timedelta = timedelta(hours=1)  # of event time, against committed rows
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    transform: Callable[[DataFrame], DataFrame] | None = None  # a Firehose-Lambda-like step
    position_commit_seconds: float = 30.0  # commit positions to a table with no new rows this often
    batch_retries: int = 3  # a failed batch is retried from the committed state this many times
    # During a backlog, read the next batch while this one dedupes and commits. Off by default: on
    # 2 cores it measured 0.99x and 1.05x (two sets of 5 paired runs, bench/bench_ingest.py): everything
    # is CPU-bound there; it is meant for clusters, whose executors idle while the driver commits.
    prefetch: bool = False
    fault_hook: Callable[[str, int], None] | None = None  # tests: raise at a phase to simulate a crash
    on_progress: Callable[[dict[str, Any]], None] | None = None  # called after every batch
    progress_file: Path | None = None  # default <run_dir>/ingest_progress.jsonl
    read_options: dict[str, Any] = field(default_factory=dict)  # ReadOptions overrides (tests)

    def validated(self) -> IngestOptions:
        """Check every value; raise :class:`ConfigError` naming the option."""
        checks = [
            (self.trigger_seconds >= 0, "trigger_seconds", "must be 0 or more seconds"),
            (self.max_batches is None or self.max_batches >= 1, "max_batches", "must be at least 1"),
            (self.duration_seconds is None or self.duration_seconds > 0, "duration_seconds", "must be positive"),
            (1 <= self.max_records_per_shard <= 1_000_000, "max_records_per_shard", "must be 1..1,000,000"),
            (
                self.starting_position in START_POSITIONS,
                "starting_position",
                "choose trim_horizon, latest or at_timestamp",
            ),
            (
                self.starting_position != "at_timestamp" or self.starting_timestamp is not None,
                "starting_timestamp",
                "is required with starting_position at_timestamp",
            ),
            (self.dedupe_lookback >= timedelta(0), "dedupe_lookback", "must not be negative"),
            (self.max_event_bytes >= 1, "max_event_bytes", "must be positive"),
            (self.batch_retries >= 0, "batch_retries", "must not be negative"),
        ]
        for ok, name, message in checks:
            if not ok:
                raise ConfigError(f"ingest option {name}: {message}.")
        return self


def parse_trigger(text: str) -> float:
    """Parse a trigger interval such as ``5s``, ``500ms``, ``1m`` or ``2`` (seconds).

    Raises:
        ConfigError: For anything else.
    """
    value = text.strip().lower()
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if value.endswith(suffix):
            value, factor = value[: -len(suffix)], scale
            break
    else:
        factor = 1.0
    try:
        seconds = float(value) * factor
    except ValueError:
        raise ConfigError(f"trigger {text!r}: use a time such as 5s, 500ms or 1m.") from None
    if seconds < 0:
        raise ConfigError(f"trigger {text!r}: must not be negative.")
    return seconds


def _sequence_at_most(column: str, last: str) -> str:
    """A SQL predicate: sequence-number string ``column`` <= ``last`` in numeric order."""
    if not last.isdigit():
        raise ValueError(f"not a sequence number: {last!r}")
    return f"(length({column}) < {len(last)} OR (length({column}) = {len(last)} AND {column} <= '{last}'))"


class IngestQuery:
    """A running (or finished) ingest query; create it with :func:`start_ingest`."""

    def __init__(self, spark: SparkSession, settings: Settings, options: IngestOptions) -> None:
        self.spark = spark
        self.settings = settings
        self.options = options.validated()
        self.id = str(uuid.uuid4())
        self.recent_progress: deque[dict[str, Any]] = deque(maxlen=100)
        self.progress_file = options.progress_file or settings.path("run_dir") / PROGRESS_FILE
        self._connection = kinesis_connection(settings)
        self._client = self._connection.client()
        self._stream_created = self._describe_stream()
        for table in (settings.table_name, settings.rejects_table_name):
            if not spark.catalog.tableExists(table):
                raise ConfigError(f"Table {table} does not exist. Create it with `icestream setup` (or notebook 00).")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._exception: BaseException | None = None
        self._status: dict[str, Any] = {"message": "Initializing", "isDataAvailable": False, "isTriggerActive": False}
        self._started_at = datetime.now(UTC)
        self._start_spec = self._resolve_start()
        self._batches_run = 0
        self._last_batch_began: float | None = None
        self._last_commit = {"events": 0.0, "rejects": 0.0}
        self._iterators: dict[str, tuple[str, str, float]] = {}  # shard -> (iterator, its position, when)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="icestream-prefetch")
        self._prefetched: tuple[Future[_Read], list[dict[str, Any]]] | None = None
        lookback = self.options.dedupe_lookback // timedelta(microseconds=1)
        self._index = dedupe.CommittedIndex(settings.table_name, self.id, lookback)

    # -- the handle -------------------------------------------------------------------------------

    @property
    def status(self) -> dict[str, Any]:
        """What the query is doing now (``message``, ``isDataAvailable``, ``isTriggerActive``)."""
        return dict(self._status)

    @property
    def last_progress(self) -> dict[str, Any] | None:
        """Progress of the most recent batch, or None before the first."""
        return self.recent_progress[-1] if self.recent_progress else None

    @property
    def is_active(self) -> bool:
        """True while the query runs."""
        return self._thread is not None and self._thread.is_alive()

    def exception(self) -> BaseException | None:
        """The error that stopped the query, if any."""
        return self._exception

    def start(self) -> IngestQuery:
        """Start the query in a background thread; returns at once."""
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
        """Stop gracefully: the batch under way finishes and commits, then the query ends."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the loop ---------------------------------------------------------------------------------

    def _describe_stream(self) -> str:
        """The stream's creation time (epoch seconds as text): it tells one incarnation from another."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            summary = self._client.describe_stream_summary(StreamName=self.settings.stream_name)
        except ClientError as error:
            if "ResourceNotFound" in str(error):
                raise ConfigError(
                    f"Stream {self.settings.stream_name} does not exist. Create it with `icestream setup`."
                ) from None
            raise ServiceUnavailableError(f"Kinesis did not describe {self.settings.stream_name}: {error}") from None
        except BotoCoreError as error:
            raise ServiceUnavailableError(f"Kinesis does not answer ({error}). Check `icestream doctor`.") from None
        return f"{summary['StreamDescriptionSummary']['StreamCreationTimestamp'].timestamp():.3f}"

    def _resolve_start(self) -> str:
        if self.options.starting_position == "trim_horizon":
            return pos.TRIM_HORIZON
        if self.options.starting_position == "latest":
            # LATEST is fixed once, as the query's start time, so every batch means the same place.
            return pos.at_timestamp(self._started_at)
        return pos.at_timestamp(self.options.starting_timestamp)  # type: ignore[arg-type]

    def _recover(self) -> None:
        """Load what both tables committed: the restart path, also used before a batch retry."""
        name, created = self.settings.stream_name, self._stream_created
        events = pos.load_committed(self.spark, self.settings.table_name, name, created)
        rejects = pos.load_committed(self.spark, self.settings.rejects_table_name, name, created)
        self.committed = {"events": dict(events.positions), "rejects": dict(rejects.positions)}
        self.processed = {"events": dict(events.positions), "rejects": dict(rejects.positions)}
        self.recovered_from = {"events": events.source, "rejects": rejects.source}
        self.next_batch_id = max(events.batch_id, rejects.batch_id) + 1
        self._iterators.clear()  # only what the tables say counts after a failure
        self._index.reset()  # it is filled from the table again when the next batch needs it
        self._discard_prefetched()

    def _run(self) -> None:
        began = time.monotonic()
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", SCHEDULER_POOLS["batch"])
        try:
            self._recover()  # before marking: the marks say which stream incarnation the rows came from
            for table in (self.settings.table_name, self.settings.rejects_table_name):
                pos.mark_source_stream(self.spark, table, self.settings.stream_name, self._stream_created)
            while not self._stop.is_set():
                if self.options.max_batches is not None and self._batches_run >= self.options.max_batches:
                    break
                if (
                    self.options.duration_seconds is not None
                    and time.monotonic() - began >= self.options.duration_seconds
                ):
                    break
                tick = time.monotonic()
                self._status = {"message": "Processing new data", "isDataAvailable": True, "isTriggerActive": True}
                progress = self._batch_with_retries()
                if self.options.available_now and (progress is None or progress["caught_up"]):
                    break
                self._status = {"message": "Waiting for next trigger", "isDataAvailable": progress is not None,
                                "isTriggerActive": False}  # fmt: skip
                remaining = self.options.trigger_seconds - (time.monotonic() - tick)
                if self.options.duration_seconds is not None:
                    remaining = min(remaining, self.options.duration_seconds - (time.monotonic() - began))
                if remaining > 0:
                    self._stop.wait(remaining)
        except BaseException as error:  # noqa: BLE001 - kept and re-raised by await_termination
            self._exception = error
        finally:
            self._discard_prefetched()
            self._pool.shutdown(wait=True)
            self._status = {"message": "Stopped", "isDataAvailable": False, "isTriggerActive": False}

    def _batch_with_retries(self) -> dict[str, Any] | None:
        attempt = 0
        while True:
            try:
                return self._batch()
            except ConfigError:
                raise  # a user error (e.g. a transform that drops columns): retrying cannot help
            except Exception:
                attempt += 1
                if attempt > self.options.batch_retries:
                    raise
                # A commit may or may not have happened: believe only what the tables say.
                time.sleep(min(10.0, 0.5 * 2**attempt))
                self._recover()

    # -- one batch --------------------------------------------------------------------------------

    def _fault(self, phase: str, batch_id: int) -> None:
        if self.options.fault_hook is not None:
            self.options.fault_hook(phase, batch_id)

    def _plan(
        self, shards: list[dict[str, Any]], positions: dict[str, dict[str, str]], iterators: dict[str, tuple[str, str]]
    ) -> list[Any]:
        """Shard plans from both tables' positions, with thresholds and any iterator that fits.

        Args:
            shards: ListShards records.
            positions: ``{"events": ..., "rejects": ...}`` processed positions.
            iterators: Shard → (iterator, the position it continues from); used only when that
                position is exactly where the plan starts.
        """
        plans = pos.plan_shards(shards, positions["events"], positions["rejects"], self._start_spec)
        return [
            replace(
                plan,
                # Thresholds come from what each table committed, not from what this run processed.
                events_committed=pos.last_sequence(self.committed["events"].get(plan.shard_id)),
                rejects_committed=pos.last_sequence(self.committed["rejects"].get(plan.shard_id)),
                iterator=iterators[plan.shard_id][0]
                if plan.shard_id in iterators and iterators[plan.shard_id][1] == plan.start
                else None,
            )
            for plan in plans
        ]

    def _read(self, plans: list[Any], batch_id: int) -> _Read:
        """The read phase: one Spark job, rows cached, one meta row per shard collected."""
        from pyspark import StorageLevel

        self._fault("before_read", batch_id)
        began = time.monotonic()
        ingest_ts = datetime.now(UTC)
        read_options = ReadOptions(
            connection=self._connection,
            stream_name=self.settings.stream_name,
            max_records=self.options.max_records_per_shard,
            max_event_bytes=self.options.max_event_bytes,
            dedupe=self.options.dedupe,
            batch_id=batch_id,
            ingest_ts=ingest_ts,
            **self.options.read_options,
        )
        # One partition per shard plan, so one read task per shard.
        encoded = self.spark.sparkContext.parallelize([(json.dumps(asdict(plan)),) for plan in plans], len(plans))
        plan_frame = self.spark.createDataFrame(encoded, "plan string")
        rows = plan_frame.mapInArrow(read_arrow(read_options), row_schema()).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            collected = rows.where("kind = 'meta'").select("meta", "raw_data").collect()
        except BaseException as error:
            rows.unpersist()
            # An executor without icestream: one clear line instead of the worker's traceback.
            raise_if_executor_import_failed(error, self.settings, self.spark.sparkContext.master)
            raise
        metas = [json.loads(row.meta) for row in collected]
        packed = {meta["shard_id"]: bytes(row.raw_data or b"") for meta, row in zip(metas, collected, strict=True)}
        return _Read(batch_id, plans, rows, metas, time.monotonic() - began, packed, ingest_ts)

    def _prefetch(self, shards: list[dict[str, Any]], done: _Read, positions: dict[str, str]) -> None:
        """Start the next batch's read while this batch dedupes and commits, when more data waits.

        Only after a batch that hit ``max_records_per_shard`` (a backlog is known to be there) and
        in which no shard ended (that would change which shards are readable): a caught-up stream
        keeps the processing-time trigger exactly. Nothing is committed by a prefetch; if this batch
        fails, the prefetched read is thrown away and the next batch plans from the tables.
        """
        capped = any(meta["read"] >= self.options.max_records_per_shard for meta in done.metas)
        if not self.options.prefetch or not capped or any(m["finished"] for m in done.metas) or self._stop.is_set():
            return
        iterators = {
            meta["shard_id"]: (meta["next_iterator"], positions[meta["shard_id"]])
            for meta in done.metas
            if meta.get("next_iterator")
        }
        plans = self._plan(shards, {"events": positions, "rejects": positions}, iterators)
        if plans:
            self._prefetched = (self._pool.submit(self._read_ahead, plans, done.batch_id + 1), shards)

    def _read_ahead(self, plans: list[Any], batch_id: int) -> _Read:
        """The prefetch thread's read, in its own scheduler pool (see SCHEDULER_POOLS)."""
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", SCHEDULER_POOLS["read_ahead"])
        return self._read(plans, batch_id)

    def _take_prefetched(self, batch_id: int) -> tuple[_Read, list[dict[str, Any]]] | None:
        if self._prefetched is None:
            return None
        future, shards = self._prefetched
        self._prefetched = None
        read = future.result()  # a failure of the prefetched read is this batch's failure
        expected = {plan.shard_id: plan.start for plan in self._plan(shards, self.processed, {})}
        if read.batch_id != batch_id or {plan.shard_id: plan.start for plan in read.plans} != expected:
            read.rows.unpersist()  # planned from positions that did not hold: read again
            return None
        return read, shards

    def _discard_prefetched(self) -> None:
        if self._prefetched is not None:
            future, _ = self._prefetched
            self._prefetched = None
            with contextlib.suppress(BaseException):
                future.result().rows.unpersist()

    def _batch(self) -> dict[str, Any] | None:
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        batch_id = self.next_batch_id
        began = time.monotonic()
        started = datetime.now(UTC)
        durations: dict[str, float] = {"plan": 0.0}

        taken = self._take_prefetched(batch_id)
        if taken is not None:
            read, shards = taken
        else:
            shards = list_shards(self._client, self.settings.stream_name)
            now = time.monotonic()
            iterators = {
                shard: (iterator, position)
                for shard, (iterator, position, when) in self._iterators.items()
                if now - when < ITERATOR_REUSE_SECONDS
            }
            plans = self._plan(shards, self.processed, iterators)
            durations["plan"] = time.monotonic() - began
            if not plans:
                return None
            read = self._read(plans, batch_id)
        rows, metas = read.rows, read.metas
        try:
            durations["read"] = read.seconds
            durations["parse"] = sum(meta["parse_seconds"] for meta in metas)
            new_positions = self._advance(read.plans, metas)
            if sum(meta["read"] for meta in metas) == 0 and not any(meta["finished"] for meta in metas):
                self._keep_iterators(metas, new_positions)
                return None  # nothing new (a shard reaching its end counts): like Spark, no empty batch
            self._fault("after_read", batch_id)
            self._prefetch(shards, read, new_positions)
            progress = self._write(batch_id, read, new_positions, started, durations, F)
            progress["prefetched"] = taken is not None
            progress["ingest_ts"] = read.ingest_ts.isoformat()  # the rows' ingest_ts (report.freshness)
        finally:
            rows.unpersist()
        self.processed = {"events": dict(new_positions), "rejects": dict(new_positions)}
        self._keep_iterators(metas, new_positions)
        self.next_batch_id = batch_id + 1
        self._batches_run += 1
        progress["duration_ms"]["total"] = round((time.monotonic() - began) * 1000, 1)
        now = time.monotonic()
        interval = now - self._last_batch_began if self._last_batch_began is not None else now - began
        progress["input_rows_per_second"] = round(progress["num_input_rows"] / max(interval, 1e-6), 1)
        progress["processed_rows_per_second"] = round(progress["num_input_rows"] / max(now - began, 1e-6), 1)
        self._last_batch_began = began
        self._report(progress)
        return progress

    def _keep_iterators(self, metas: list[dict[str, Any]], positions: dict[str, str]) -> None:
        now = time.monotonic()
        for meta in metas:
            if meta.get("next_iterator") and not meta["finished"]:
                self._iterators[meta["shard_id"]] = (meta["next_iterator"], positions[meta["shard_id"]], now)
            else:
                self._iterators.pop(meta["shard_id"], None)

    def _advance(self, plans: list[pos.ShardPlan], metas: list[dict[str, Any]]) -> dict[str, str]:
        positions = dict(self.processed["events"])
        by_shard = {meta["shard_id"]: meta for meta in metas}
        for plan in plans:
            meta = by_shard[plan.shard_id]
            last = meta["last_sequence"]
            if meta["finished"]:
                positions[plan.shard_id] = pos.ended(last or pos.last_sequence(plan.start))
            elif last:
                positions[plan.shard_id] = pos.after(last)
            else:
                positions.setdefault(plan.shard_id, plan.start)
        return positions

    def _in_range(self, metas: list[dict[str, Any]]) -> str:
        """Restrict cached rows to what the first read reported (a recomputed task may read more)."""
        for meta in metas:
            # Shard ids come from ListShards; they reach SQL text only in Kinesis's own format.
            if not SHARD_ID.fullmatch(meta["shard_id"]):
                raise IngestError(f"unexpected shard id {meta['shard_id']!r} from ListShards")
        clauses = [
            f"(shard_id = '{meta['shard_id']}' AND {_sequence_at_most('sequence_number', meta['last_sequence'])})"
            for meta in metas
            if meta["last_sequence"]
        ]
        return " OR ".join(clauses) if clauses else "false"

    def _duplicates(self, packed: dict[str, bytes]) -> tuple[dedupe.Batch, np.ndarray]:
        """The batch's new events and which of them to drop (first copy wins).

        Within a shard the read task already dropped repeats; this catches repeats across shards
        and against rows committed within the lookback, from the index of committed ids (see
        :mod:`icestream.ingest.dedupe`): no Spark job unless the index must read the table.
        """
        batch = dedupe.Batch.unpack(packed)
        return batch, dedupe.duplicates(self._index, batch, self.spark)

    def _write(
        self,
        batch_id: int,
        read: _Read,
        new_positions: dict[str, str],
        started: datetime,
        durations: dict[str, float],
        F: Any,  # noqa: N803
    ) -> dict[str, Any]:
        rows, metas = read.rows, read.metas
        in_range = self._in_range(metas)
        properties = {
            f"snapshot-property.{pos.POSITIONS_KEY}": pos.encode_positions(new_positions),
            f"snapshot-property.{pos.STREAM_KEY}": self.settings.stream_name,
            f"snapshot-property.{pos.BATCH_KEY}": str(batch_id),
            f"snapshot-property.{pos.QUERY_KEY}": self.id,
            f"snapshot-property.{pos.CREATED_KEY}": self._stream_created,
        }
        mark = time.monotonic()
        events = rows.where(f"kind = 'event' AND ({in_range})")
        batch, dropped = self._duplicates(read.packed) if self.options.dedupe else (None, None)
        drop = batch.keys(dropped) if batch is not None else set()
        if drop:
            events = events.where(~F.concat_ws(":", "shard_id", "ordinal").isin(sorted(drop)))
        if self.options.transform is not None:
            events = self._transformed(events.select(*table_columns()))
        events = self._aligned(events, F)
        durations["dedupe"] = time.monotonic() - mark

        candidates = {
            "rejects": sum(meta["rejected"] - meta["replayed_rejects"] for meta in metas),
            "events": sum(meta["good"] - meta["replayed_events"] - meta["deduplicated"] for meta in metas) - len(drop),
        }
        snapshots: dict[str, int | None] = {"events": None, "rejects": None}
        written = {"events": 0, "rejects": 0}
        for kind, frame, table in (
            (
                "rejects",
                rows.where(f"kind = 'reject' AND ({in_range})").select(*REJECT_COLUMNS),
                self.settings.rejects_table_name,
            ),
            ("events", events, self.settings.table_name),
        ):
            mark = time.monotonic()
            due = time.monotonic() - self._last_commit[kind] >= self.options.position_commit_seconds
            if candidates[kind] > 0 or (due and new_positions != self.committed[kind]):
                # No shuffle before the write: the cached rows go straight to the writers, one task
                # per WRITE_ROWS_PER_TASK rows, and fanout writers give one file per partition a
                # task touches (a batch's events are a few hours at most; its rejects one day).
                tasks = max(1, -(-candidates[kind] // WRITE_ROWS_PER_TASK))
                frame.coalesce(tasks).writeTo(table).options(**properties, **{"distribution-mode": "none"}).append()
                self._last_commit[kind] = time.monotonic()
                self.committed[kind] = dict(new_positions)
                snapshots[kind], written[kind] = self._committed_snapshot(table, batch_id)
                if kind == "events" and batch is not None:
                    self._learn(batch, dropped)
            durations[f"write_{kind}"] = time.monotonic() - mark
            if kind == "rejects":
                self._fault("between_commits", batch_id)
        self._fault("after_commit", batch_id)
        progress = self._progress(batch_id, metas, drop, written, candidates, snapshots, durations, started)
        if self.options.dedupe:
            index = self._index
            progress["dedupe_index"] = {"ids": len(index), "loads": index.loads, "loaded_rows": index.loaded_rows}
        return progress

    def _learn(self, batch: dedupe.Batch, dropped: np.ndarray) -> None:
        """Tell the index which ids the events commit just added."""
        if self.options.transform is not None:
            # A transform may drop or change rows: only the table knows what was written.
            self._index.reset()
            return
        kept = np.setdiff1d(np.arange(len(batch), dtype=np.int64), dropped, assume_unique=True)
        self._index.add(batch, kept)

    def _transformed(self, events: DataFrame) -> DataFrame:
        result = self.options.transform(events)  # type: ignore[misc]
        missing = [column for column in table_columns() if column not in result.columns]
        if missing:
            raise ConfigError(f"the ingest transform must keep the table's columns; it dropped {', '.join(missing)}.")
        return result.select(*table_columns())

    def _aligned(self, events: DataFrame, F: Any) -> DataFrame:  # noqa: N803
        """Match the table's current columns: schema evolution while streaming.

        A column added to the table after the base schema (``ALTER TABLE ... ADD COLUMN coupon``)
        is filled from ``properties['coupon']``, where the parser keeps unknown top-level fields,
        cast to the column's type (null when absent or not castable). So a new optional field
        that starts arriving becomes a column with one DDL statement and no change here.
        """
        fields = self.spark.table(self.settings.table_name).schema.fields  # one catalog lookup per batch
        present = set(events.columns)
        return events.select(  # one select: each DataFrame step is analysed again on the driver
            *(
                F.col(column.name)
                if column.name in present
                else F.col("properties").getItem(column.name).cast(column.dataType).alias(column.name)
                for column in fields
            )
        )

    def _committed_snapshot(self, table: str, batch_id: int) -> tuple[int | None, int]:
        """Our snapshot's id and added-records (another writer may have committed after us)."""
        for snapshot in pos.ancestry(self.spark, table):
            summary = snapshot.summary()
            if summary.get(pos.QUERY_KEY) == self.id and summary.get(pos.BATCH_KEY) == str(batch_id):
                return int(snapshot.snapshotId()), int(summary.get("added-records") or 0)
        return None, 0

    def _progress(
        self,
        batch_id: int,
        metas: list[dict[str, Any]],
        drop: set[str],
        written: dict[str, int],
        candidates: dict[str, int],
        snapshots: dict[str, int | None],
        durations: dict[str, float],
        started: datetime,
    ) -> dict[str, Any]:
        dropped_per_shard: dict[str, int] = {}
        for key in drop:
            shard = key.rsplit(":", 1)[0]
            dropped_per_shard[shard] = dropped_per_shard.get(shard, 0) + 1
        shards = {}
        reasons: dict[str, int] = {}
        for meta in metas:
            for reason, count in meta["reasons"].items():
                reasons[reason] = reasons.get(reason, 0) + count
            shards[meta["shard_id"]] = {
                "read": meta["read"],
                "good": meta["good"],
                "rejected": meta["rejected"],
                "deduplicated": meta["deduplicated"] + dropped_per_shard.get(meta["shard_id"], 0),
                "replayed": meta["replayed_events"] + meta["replayed_rejects"],
                "last_sequence": meta["last_sequence"],
                "finished": meta["finished"],
                "millis_behind_latest": meta["millis_behind"],
                "calls": meta["calls"],
                "throttled": meta["throttled"],
                "retried": meta["retried"],
                "iterator_renewals": meta["iterator_renewals"],
            }
        read = sum(meta["read"] for meta in metas)
        deduplicated = sum(meta["deduplicated"] for meta in metas) + len(drop)
        replayed = sum(meta["replayed_events"] + meta["replayed_rejects"] for meta in metas)
        behind = [meta["millis_behind"] for meta in metas if meta["millis_behind"] is not None]
        capped = any(meta["read"] >= self.options.max_records_per_shard for meta in metas)
        arrivals = [meta[key] for meta in metas for key in ("first_arrival", "last_arrival") if meta.get(key)]
        return {
            "id": self.id,
            "batch_id": batch_id,
            "timestamp": started.isoformat(),
            "num_input_rows": read,
            "written": written["events"],
            "rejected": written["rejects"],
            "deduplicated": deduplicated,
            "replayed": replayed,
            "transform_dropped": max(0, candidates["events"] - written["events"]) if snapshots["events"] else 0,
            "duration_ms": {phase: round(seconds * 1000, 1) for phase, seconds in durations.items()},
            "millis_behind_latest": max(behind) if behind else None,
            # A shard that just ended makes its children readable: that is more data, not the end.
            "caught_up": not capped and all(value == 0 for value in behind) and not any(m["finished"] for m in metas),
            "events_snapshot_id": snapshots["events"],
            "rejects_snapshot_id": snapshots["rejects"],
            "reject_reasons": reasons,
            "first_arrival": min(arrivals) if arrivals else None,
            "last_arrival": max(arrivals) if arrivals else None,
            "shards": shards,
        }

    def _report(self, progress: dict[str, Any]) -> None:
        self.recent_progress.append(progress)
        self.progress_file.parent.mkdir(parents=True, exist_ok=True)
        with self.progress_file.open("a") as sink:
            sink.write(json.dumps(progress, separators=(",", ":")) + "\n")
        if self.options.on_progress is not None:
            with contextlib.suppress(Exception):  # a display callback must never stop the ingest
                self.options.on_progress(progress)


def start_ingest(spark: SparkSession | None = None, settings: Settings | None = None, **options: Any) -> IngestQuery:
    """Start the ingest query in the background and return its handle.

    Args:
        spark: The session (default: ``get_spark(settings)``).
        settings: The settings (default: ``load_settings()``).
        **options: Fields of :class:`IngestOptions` (``trigger_seconds``, ``available_now``, ...).

    Returns:
        The running query.

    Raises:
        ConfigError: For an invalid option.
        ServiceUnavailableError: If Kinesis cannot be reached.
    """
    from icestream.spark import get_spark

    settings = settings or load_settings()
    query = IngestQuery(spark or get_spark(settings), settings, ingest_options(settings, **options))
    return query.start()


def ingest_options(settings: Settings, **options: Any) -> IngestOptions:
    """Build :class:`IngestOptions` from keyword options, with the defaults the settings give.

    Args:
        settings: Where ``starting_position`` comes from when it is not given
            (``ICESTREAM_START_POSITION``).
        **options: Fields of :class:`IngestOptions`; ``dedupe_lookback`` may be seconds.

    Returns:
        The options (not yet validated: the query validates them when it is created).

    Raises:
        ConfigError: For an option that does not exist.
    """
    unknown = set(options) - set(IngestOptions.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown ingest option(s): {', '.join(sorted(unknown))}.")
    if options.get("starting_position") is None:
        options["starting_position"] = settings.start_position
    if "dedupe_lookback" in options and not isinstance(options["dedupe_lookback"], timedelta):
        options["dedupe_lookback"] = timedelta(seconds=float(options["dedupe_lookback"]))
    return IngestOptions(**options)
