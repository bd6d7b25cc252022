"""Read one shard in one Spark task: GetRecords within Kinesis limits, then parse each record.

This runs on an executor, with boto3 inside the task and nothing from the driver but a
:class:`~icestream.ingest.reading.shard_plan.ShardPlan` and :class:`ReadOptions`. It keeps to the per-shard read
limits (``1 / min_call_interval`` GetRecords calls per second, 10,000 records per call), backs off with
jitter on throttling and transient errors, renews an expired iterator, and stops at the tip, the end or the cap.

Each Kinesis record first expands to the user records it carries (:mod:`icestream.ingest.expand`:
KPL aggregates, gzip and zlib); the cap ``max_records`` counts user records (an answer of aggregates
can hold more than one call's 10,000: it is read on to the cap), so a batch may end inside an aggregate,
at ``AFTER:<seq>:<sub>``; the next batch starts at that record again and skips those already done.

It yields one row per user record kept (an event, or a change of a change stream, or a reject) and,
last, one ``meta`` row describing the read (counts, last sequence, whether the shard ended, lag,
retries), so a batch needs a single Spark job to both read and learn what was read.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from icestream.errors import ShardReadError
from icestream.ingest import positions as pos
from icestream.ingest.call_retry import THROTTLE_CODES, error_code, is_transient_call
from icestream.ingest.changes import ChangeSpec
from icestream.ingest.expand import SPECIAL_FIRST_BYTES, expand_record, needs_decoding
from icestream.ingest.positions import sequence_key
from icestream.ingest.reading.read_stats import ReadStats
from icestream.ingest.reading.record_rows import RecordRows
from icestream.ingest.reading.shard_plan import ShardPlan
from icestream.ingest.reading.threads import RecordBudget
from icestream.kinesis.clients import KinesisConnection
from icestream.limits import DEFAULT_MAX_EVENT_BYTES, GET_CALLS_PER_SECOND, MAX_RECORDS_PER_GET


@dataclass(frozen=True)
class ReadOptions:
    """How read tasks behave; shipped to executors, so it holds no client and no credentials."""

    connection: KinesisConnection | None  # None: the rows of records read by another client (kafka_read)
    stream_name: str
    max_records: int = MAX_RECORDS_PER_GET  # per shard per batch (a task's shards pool theirs: pooled_cap)
    pooled_cap: int | None = None  # pooled: one shard of a task takes at most this many (None: not pooled)
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    dedupe: bool = True
    archive: bool = False  # also yield a ``raw`` row per record (the raw archive)
    evolve: bool = False  # schema evolution on: new top-level fields in ``extras`` (ingest.evolve)
    changes: ChangeSpec | None = None  # a change stream: records are changes of its keyed table (ingest.changes)
    batch_id: int | None = None  # written to every row (BATCH_FIELDS)
    ingest_ts: datetime | None = None  # when the batch's read began, written to every row
    min_call_interval: float = 1 / GET_CALLS_PER_SECOND  # per shard and API
    max_calls: int = 100  # per shard per batch, so a batch always ends
    shard_threads: int = 8  # a task's shards read side by side, at most this many at once (ingest.side_by_side)
    max_attempts: int = 8  # consecutive failures before the task gives up
    read_timeout: float = 10.0  # seconds per call: a hung endpoint must not hold a batch for minutes
    base_backoff: float = 0.1
    max_backoff: float = 5.0


class _ShardReader:
    """The state of one task's read: kept small and explicit so each failure path is testable."""

    def __init__(
        self,
        plan: ShardPlan,
        options: ReadOptions,
        client: Any,
        sleep: Callable[[float], None],
        now: Callable[[], float] = time.time,
        budget: RecordBudget | None = None,
    ) -> None:
        self.plan = plan
        # What this shard may take: its share, then what its task's other shards left (side_by_side).
        self.pool = budget
        self.own = options.max_records  # of its share, not yet granted
        self.limit = (options.pooled_cap or options.max_records) if budget is not None else options.max_records
        self.cap = 0  # records granted so far: the read ends at this many user records
        self.options = options
        self.client = client
        self.sleep = sleep
        self.now = now  # wall clock, epoch seconds: compared with Kinesis arrival times
        self.stats = ReadStats(plan.shard_id)
        self.last_call: dict[str, float] = {}  # per API: each has its own 5 calls/s per-shard limit
        self.failures = 0
        self.rows = RecordRows(plan, options, self.stats)  # a user record's row, or None (replayed, a repeat)
        # A plan starting inside an aggregate: its user records up to this one are done already.
        self.resume = (pos.last_sequence(plan.start), pos.last_sub(plan.start))

    def _pace(self, operation: str) -> None:
        wait = self.options.min_call_interval - (time.monotonic() - self.last_call.get(operation, 0.0))
        if wait > 0:
            self.sleep(wait)
        self.last_call[operation] = time.monotonic()

    def _backoff(self, error: Exception) -> None:
        self.failures += 1
        if self.failures >= self.options.max_attempts:
            raise ShardReadError(
                f"shard {self.plan.shard_id}: {self.failures} failures in a row, last {type(error).__name__}: {error}"
            ) from error
        ceiling = min(self.options.max_backoff, self.options.base_backoff * 2**self.failures)
        self.sleep(random.uniform(ceiling / 2, ceiling))  # noqa: S311 - jitter, not cryptography

    def _end_share(self) -> None:
        """Leave what this shard did not take of its share to the task's other shards."""
        if self.pool is not None:
            self.pool.ended(self.own + max(0, self.cap - self.stats.read))
            self.own, self.cap = 0, self.stats.read

    def _granted(self) -> bool:
        """Reserve what the next GetRecords may return (or more of an answer of KPL aggregates); False: none left."""
        wanted = min(MAX_RECORDS_PER_GET, self.limit - self.stats.read) - (self.cap - self.stats.read)
        mine = max(0, min(wanted, self.own))
        self.own -= mine
        self.cap += mine
        if self.pool is not None and self.cap <= self.stats.read and wanted > 0:
            self.cap += self.pool.take(wanted)  # past its share: what the task's other shards leave
        self.stats.capped = self.cap <= self.stats.read
        return not self.stats.capped

    def _new_iterator(self) -> str:
        position = f"AFTER:{self.stats.last_sequence}" if self.stats.last_sequence else self.plan.start
        while True:
            self._pace("GetShardIterator")
            try:
                answer = self.client.get_shard_iterator(
                    StreamName=self.options.stream_name, ShardId=self.plan.shard_id, **pos.iterator_arguments(position)
                )
                return answer["ShardIterator"]
            except Exception as error:
                if not is_transient_call(error):
                    raise
                self.stats.throttled += error_code(error) in THROTTLE_CODES
                self.stats.retried += 1
                self._backoff(error)

    def read(self) -> Iterator[tuple]:
        stats = self.stats
        started = time.monotonic()
        began = self.now()
        parse_time = 0.0
        if self.pool is not None:
            self.pool.started()
        try:
            # An iterator handed over from the previous batch continues exactly after its last record
            # (and is valid for 5 minutes): it saves a GetShardIterator call per shard and batch.
            iterator = self.plan.iterator or self._new_iterator()
            while self.stats.calls < self.options.max_calls and self._granted():
                self._pace("GetRecords")
                self.stats.calls += 1
                asked = min(MAX_RECORDS_PER_GET, self.cap - self.stats.read)
                try:
                    answer = self.client.get_records(ShardIterator=iterator, Limit=asked)
                except Exception as error:
                    if error_code(error) == "ExpiredIteratorException":
                        self.stats.iterator_renewals += 1
                        iterator = self._new_iterator()
                        continue
                    if not is_transient_call(error):
                        raise
                    self.stats.throttled += error_code(error) in THROTTLE_CODES
                    self.stats.retried += 1
                    self._backoff(error)
                    continue
                self.failures = 0
                records = answer.get("Records", [])
                began_parse = time.monotonic()
                cut = False
                taken = len(records)
                for index, record in enumerate(records):
                    data = record["Data"]
                    if self.options.archive or (data and data[0] in SPECIAL_FIRST_BYTES and needs_decoding(data)):
                        yield from self._record(record)
                    else:  # the common case, a plain payload: one user record, no expansion's objects
                        stats.read += 1
                        sequence = stats.last_sequence = record["SequenceNumber"]
                        arrival = record.get("ApproximateArrivalTimestamp")
                        row = self.rows.row(sequence, None, record.get("PartitionKey"), arrival, data, data, None)
                        if row is not None:
                            yield row
                    # At the cap with user records left (in this aggregate or this answer), none more granted:
                    # stop here; the answer's iterator continues after its last record, so it is not handed over.
                    if stats.read >= self.cap and (
                        stats.last_sub is not None or (index + 1 < len(records) and not self._granted())
                    ):
                        cut = True
                        taken = index + 1
                        break
                stats.note_arrivals(records[:taken])
                parse_time += time.monotonic() - began_parse
                self.own += self.cap - stats.read  # what the answer did not hold stays this shard's
                self.cap = stats.read
                self.stats.millis_behind = answer.get("MillisBehindLatest")
                if cut:
                    self.stats.next_iterator = None
                    self.stats.capped = True
                    break
                next_iterator = answer.get("NextShardIterator")
                caught_up = self.stats.millis_behind in (0, None)
                if next_iterator is None or (self.plan.closed and caught_up and not records):
                    self.stats.finished = True  # closed shard read to its end
                    break
                iterator = next_iterator
                self.stats.next_iterator = next_iterator
                if caught_up and (not records or not self.plan.closed):
                    # At the tip: what arrives next belongs to the next batch. MillisBehindLatest is a time,
                    # not a count: an answer as full as asked may have left records that arrived just now.
                    self.stats.capped = len(records) >= asked
                    break
        finally:
            self._end_share()
        self.stats.parse_seconds = parse_time
        self.stats.read_seconds = time.monotonic() - started - parse_time
        # The lag when the read began (docs/glossary.md): the shard's newest arrival then (the last record
        # read plus what MillisBehindLatest says is left, never later than the read's start) minus the oldest
        # record not yet committed; an idle stream's age is no lag, so `began` alone would overstate it.
        if stats.first_arrival is not None and stats.last_arrival is not None:
            newest = min(began, stats.last_arrival + (stats.millis_behind or 0) / 1000)
            stats.behind_before_ms = max(0, round((newest - stats.first_arrival) * 1000))
        elif stats.calls:
            stats.behind_before_ms = 0
        yield self.rows.meta_row()

    def _record(self, record: dict[str, Any]) -> Iterator[tuple]:
        stats = self.stats
        sequence = record["SequenceNumber"]
        stats.last_sequence = sequence
        arrival = record.get("ApproximateArrivalTimestamp")
        data = record["Data"]
        partition_key = record.get("PartitionKey")
        # The raw archive: the Kinesis record as received (an aggregate once, not per user record),
        # if the archive does not hold it yet. A batch resuming inside an aggregate skips it.
        if self.options.archive and sequence_key(sequence) > sequence_key(self.plan.archive_committed):
            stats.archived += 1
            yield ("raw", self.plan.shard_id, sequence, partition_key, arrival, *(None,) * 8, bytes(data), *(None,) * 5)
        # The common case, a plain payload, goes without the expansion's objects.
        if not data or data[0] not in SPECIAL_FIRST_BYTES or not needs_decoding(data):
            stats.read += 1
            row = self.rows.row(sequence, None, partition_key, arrival, data, data, None)
            if row is not None:
                yield row
            return
        parts = expand_record(data, partition_key, self.options.max_event_bytes)
        resume_sequence, resume_sub = self.resume
        skip = resume_sub if resume_sequence == sequence and resume_sub is not None else -1
        self.resume = (None, None)
        stats.aggregated += parts[0].sub is not None
        for part in parts:
            if part.sub is not None and part.sub <= skip:
                continue  # done in an earlier batch
            stats.read += 1
            row = self.rows.row(sequence, part.sub, part.partition_key, arrival, part.raw, part.payload, part.rejection)
            if row is not None:
                yield row
            if part.sub is not None and part.sub < len(parts) - 1 and stats.read >= self.cap and not self._granted():
                stats.last_sub = part.sub  # the cap falls inside the aggregate
                return


_CLIENTS: dict[tuple[KinesisConnection, float], Any] = {}


def _worker_client(options: ReadOptions) -> Any:
    """One client per connection per Python worker: Spark reuses workers, and building a boto3
    client (loading its service model) costs more than a small batch's whole read."""
    if options.connection is None:
        raise ValueError("a shard read needs the Kinesis connection (ReadOptions.connection)")
    key = (options.connection, options.read_timeout)
    if key not in _CLIENTS:
        # Retries are ours, with pacing and backoff: botocore's own are off (its max_attempts counts
        # retries after the first call, so 1 would still repeat every failed call once, unpaced).
        _CLIENTS[key] = options.connection.client(read_timeout=options.read_timeout, max_attempts=0)
    return _CLIENTS[key]


def read_shard(
    plan: ShardPlan,
    options: ReadOptions,
    client: Any = None,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], float] = time.time,
    budget: RecordBudget | None = None,
) -> Iterator[tuple]:
    """Read one shard for one batch; yields event and reject rows, then one meta row.

    Args:
        plan: Where to start and what is already committed.
        options: Limits, retries and the connection.
        client: A Kinesis client (default: one built from ``options.connection``); tests pass fakes.
        sleep: The pause function (tests pass a fake clock).
        now: The wall clock in epoch seconds (tests pass a fixed one).
        budget: The records the task's shards share (None: this shard's ``max_records`` alone).

    Yields:
        Tuples in :data:`ROW_FIELDS` order.

    Raises:
        ShardReadError: After ``max_attempts`` consecutive transient failures.
    """
    client = client or _worker_client(options)
    yield from _ShardReader(plan, options, client, sleep, now, budget).read()
