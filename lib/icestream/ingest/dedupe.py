"""Deduplication by ``event_id`` without a Spark job per batch: an index of committed ids.

Producers retry, so the same event can arrive twice: in one shard (the read task drops the repeat
with an exact set of the ids it has seen), in two shards, or in a later batch after the first copy
was committed. The last two need the batch's ids compared with each other and with the rows the
table already holds within ``dedupe_lookback`` of the batch's event time.

Doing that in Spark (a shuffle over the batch plus a scan of the table's lookback window) cost
about 0.4 s and 1 core-second per batch on 2 cores, and grows with the table. Instead, like a
Flink or Kafka Streams state store restored from its changelog, the driver keeps
:class:`CommittedIndex`: the 128-bit digests and event times of the committed ids, filled from the
table when needed (once after a start, then only for late events older than what it holds) and
kept current by adding each batch's new ids right after they commit. The read tasks ship the
digests of their new events in their meta rows (:func:`pack`), so a batch's dedupe is a few numpy
operations on the driver.

**Exactness.** Ids are compared by BLAKE2b-128 digests. Two different ids share a digest with
probability 2^-128 per pair: with a million ids held and 40,000 per batch, about 1e-27 per batch,
far below the rate of undetected hardware errors; nothing else is approximate. The index answers
only for the table state it was built from: before each batch :meth:`CommittedIndex.sync` walks the
table's snapshots back to the one it knows, and anything but this query's own appends and
compactions (another writer's append, a delete, an overwrite, a rollback, expired history) makes
it start again from the table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from icestream.lake.inspect import ancestry
from icestream.lake.summary import QUERY_KEY
from icestream.runtime.arrow_frames import collect_arrow, map_in_arrow
from icestream.timestamps import to_micros

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DIGEST_BYTES = 16
UNBOUNDED = np.iinfo(np.int64).max
DIGEST_SCHEMA = "hi bigint, lo bigint, times bigint"  # what digest_batches gives for each event
NO_SNAPSHOT = -1  # the index was built from an empty table (no snapshot yet)
CONTENT_KEEPING = frozenset(("replace",))  # compaction and manifest rewrites: same rows, new files


def digest(event_id: str) -> bytes:
    """The 16-byte BLAKE2b digest of an event id (the same in every process and machine)."""
    return hashlib.blake2b(event_id.encode("utf-8", "surrogatepass"), digest_size=DIGEST_BYTES).digest()


@dataclass
class Packer:
    """Collects a read task's new events: digest, event time and arrival, in emission order.

    ``add`` only keeps the values (it runs once per event in the read task's hot loop); ``pack``
    turns them into digests and epoch microseconds once per task, the times column by column.
    """

    ids: list[str] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)
    arrivals: list[datetime | None] = field(default_factory=list)

    def add(self, event_id: str, event_ts: datetime, arrival: datetime | None) -> int:
        """Add one event; returns its ordinal (its position among the task's new events)."""
        self.ids.append(event_id)
        self.times.append(event_ts)
        self.arrivals.append(arrival)
        return len(self.ids) - 1

    def pack(self) -> bytes:
        """``digests | event times | arrivals``, little-endian int64: 32 bytes per event (no arrival: 0)."""
        return b"".join(map(digest, self.ids)) + _micros(self.times) + _micros(self.arrivals)


def _micros(moments: Sequence[datetime | None]) -> bytes:
    """Epoch microseconds of ``moments`` as little-endian int64 (None: 0), exactly as ``to_micros``.

    Arrow converts the whole list at once: an aware datetime by its UTC offset, a naive one as UTC.
    """
    import pyarrow as pa

    if not moments:
        return b""
    stamps = pa.array(moments, type=pa.timestamp("us", tz="UTC")).cast(pa.int64()).fill_null(0)
    return stamps.to_numpy(zero_copy_only=False).astype("<i8").tobytes()


@dataclass(frozen=True)
class Batch:
    """A batch's new events, one entry per event, from the read tasks' packed digests."""

    hi: np.ndarray  # int64: the digest's first 8 bytes
    lo: np.ndarray  # int64: its last 8 bytes
    times: np.ndarray  # int64 microseconds of event time
    arrivals: np.ndarray  # int64 microseconds of Kinesis arrival (0 if unknown)
    shards: np.ndarray  # int64 index into ``shard_ids``
    ordinals: np.ndarray  # int64 position among that shard's new events
    shard_ids: tuple[str, ...]

    @classmethod
    def unpack(cls, packed: dict[str, bytes]) -> Batch:
        """Build from ``{shard_id: Packer.pack()}``."""
        names = ("hi", "lo", "times", "arrivals", "shards", "ordinals")
        parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
        shard_ids = tuple(sorted(packed))
        for index, shard in enumerate(shard_ids):
            blob = packed[shard]
            if len(blob) % 32:
                raise ValueError(f"packed digests of {shard} have {len(blob)} bytes, not a multiple of 32")
            count = len(blob) // 32
            pairs = np.frombuffer(blob, dtype="<i8", count=2 * count).reshape(count, 2)
            parts["hi"].append(pairs[:, 0])
            parts["lo"].append(pairs[:, 1])
            parts["times"].append(np.frombuffer(blob, dtype="<i8", count=count, offset=16 * count))
            parts["arrivals"].append(np.frombuffer(blob, dtype="<i8", count=count, offset=24 * count))
            parts["shards"].append(np.full(count, index, dtype=np.int64))
            parts["ordinals"].append(np.arange(count, dtype=np.int64))
        arrays = {
            name: np.concatenate(values).astype(np.int64) if values else np.empty(0, dtype=np.int64)
            for name, values in parts.items()
        }
        return cls(shard_ids=shard_ids, **arrays)

    def __len__(self) -> int:
        return len(self.hi)

    def keys(self, rows: np.ndarray) -> set[str]:
        """``shard:ordinal`` keys of the given entries (the ingest drops rows by these)."""
        return {f"{self.shard_ids[self.shards[row]]}:{self.ordinals[row]}" for row in rows.tolist()}

    def later_copies(self, among: np.ndarray) -> np.ndarray:
        """Entries (of ``among``) whose digest an earlier copy in the batch has; the first arrival wins.

        Copies are ordered by arrival, then shard id, then position in the shard, so the choice
        does not depend on which task finished first.
        """
        if len(among) < 2:
            return np.empty(0, dtype=np.int64)
        keys = (self.ordinals, self.shards, self.arrivals, self.lo, self.hi)  # the last is the primary key
        order = among[np.lexsort(tuple(key[among] for key in keys))]
        same = (self.hi[order][1:] == self.hi[order][:-1]) & (self.lo[order][1:] == self.lo[order][:-1])
        return order[1:][same]


@dataclass
class CommittedIndex:
    """Digests and event times of the events a table holds from ``low`` on, as of ``snapshot_id``.

    ``snapshot_id`` None means the index knows nothing yet (it loads before it answers).
    """

    table: str
    query_id: str
    lookback_us: int
    hi: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    lo: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    times: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    low: int = UNBOUNDED  # every row with event time >= low is in the index
    snapshot_id: int | None = None
    high_water: int = -UNBOUNDED  # the latest event time committed through the index, capped by arrival
    loads: int = 0  # times rows were read from the table (for progress and tests)
    loaded_rows: int = 0

    def reset(self) -> None:
        """Forget everything: the next batch loads from the table again."""
        empty = np.empty(0, dtype=np.int64)
        self.hi, self.lo, self.times = empty, empty, empty
        self.low, self.snapshot_id, self.high_water = UNBOUNDED, None, -UNBOUNDED

    def __len__(self) -> int:
        return len(self.hi)

    # -- keeping in step with the table -------------------------------------------------------------

    def sync(self, spark: SparkSession) -> None:
        """Check the table still holds what the index says; reset the index if not.

        Walks the table's snapshots from the current one back to ``snapshot_id``. This query's own
        commits (their ids were added when they committed) and ``replace`` snapshots (compaction:
        same rows in new files) keep the index valid; any other snapshot, or not finding
        ``snapshot_id`` at all (rollback, expired history), resets it.
        """
        if self.snapshot_id is None:
            return
        current = None
        for snapshot in ancestry(spark, self.table):
            snapshot_id = int(snapshot.snapshotId())
            current = snapshot_id if current is None else current
            if snapshot_id == self.snapshot_id:
                break
            ours = snapshot.summary().get(QUERY_KEY) == self.query_id
            if not ours and snapshot.operation() not in CONTENT_KEEPING:
                self.reset()  # another writer changed the rows
                return
        else:
            if self.snapshot_id != NO_SNAPSHOT:  # walked to the first snapshot without meeting ours
                self.reset()
                return
        self.snapshot_id = current if current is not None else NO_SNAPSHOT

    def ensure_from(self, spark: SparkSession, start: int) -> None:
        """Make the index hold every committed row with event time >= ``start`` (loading the gap)."""
        if self.snapshot_id is None:
            snapshot = next(ancestry(spark, self.table), None)
            self.snapshot_id = int(snapshot.snapshotId()) if snapshot is not None else NO_SNAPSHOT
            self._load(spark, start, UNBOUNDED)
            self.low = start
        elif start < self.low:
            self._load(spark, start, self.low)
            self.low = start

    def _load(self, spark: SparkSession, start: int, end: int) -> None:
        """Add the rows with ``start <= event time < end`` of snapshot ``snapshot_id``."""
        self.loads += 1
        if self.snapshot_id == NO_SNAPSHOT:
            return
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        frame = spark.read.format("iceberg").option("versionAsOf", str(self.snapshot_id)).load(self.table)
        # The bounds go as epoch microseconds, the index's own form: a datetime literal was rebased
        # through the Julian calendar (0001-01-01 became 0001-01-03), and the load missed those rows.
        condition = F.col("event_ts") >= F.timestamp_micros(F.lit(start))
        if end != UNBOUNDED:
            condition &= F.col("event_ts") < F.timestamp_micros(F.lit(end))
        digests = map_in_arrow(frame.where(condition).select("event_id", "event_ts"), digest_batches, DIGEST_SCHEMA)
        loaded = collect_arrow(digests)  # Arrow, not pandas: the driver does not import pandas for this
        self.loaded_rows += loaded.num_rows
        self._extend(*(loaded.column(name).to_numpy().astype(np.int64) for name in ("hi", "lo", "times")))

    def _extend(self, hi: np.ndarray, lo: np.ndarray, times: np.ndarray) -> None:
        self.hi = np.concatenate((self.hi, hi))
        self.lo = np.concatenate((self.lo, lo))
        self.times = np.concatenate((self.times, times))

    # -- answering and learning ---------------------------------------------------------------------

    def window(self, batch: Batch) -> tuple[int, int]:
        """The event-time window committed rows are compared in: the batch's range ± the lookback.

        Clamped to int64 (Spark's and numpy's microseconds): a lookback of centuries around year 1
        or 9999 would otherwise reach past what either can compare.
        """
        start = max(int(batch.times.min()) - self.lookback_us, -UNBOUNDED)
        return start, min(int(batch.times.max()) + self.lookback_us, UNBOUNDED - 1)

    def committed(self, batch: Batch, start: int, end: int) -> np.ndarray:
        """Batch entries whose id the table holds with an event time in ``[start, end]``."""
        if not len(batch) or not len(self):
            return np.empty(0, dtype=np.int64)
        inside = (self.times >= start) & (self.times <= end)
        hi, lo = self.hi[inside], self.lo[inside]
        hits = np.flatnonzero(np.isin(batch.hi, hi))
        if not len(hits):
            return hits
        # The first halves matched; compare the second halves too (exact at 128 bits).
        near = np.isin(hi, batch.hi[hits])
        pairs = set(zip(hi[near].tolist(), lo[near].tolist(), strict=True))
        return np.array(
            [row for row in hits.tolist() if (int(batch.hi[row]), int(batch.lo[row])) in pairs], dtype=np.int64
        )

    def add(self, batch: Batch, rows: np.ndarray) -> None:
        """Learn the ids of ``rows`` of ``batch``: they were just committed by this query."""
        if not len(rows):
            return
        self._extend(batch.hi[rows], batch.lo[rows], batch.times[rows])
        # An event's claimed time counts no later than its arrival: one event dated 9999 moved the
        # mark to 9999 and evicted every id, so each later batch read the table again (loads 1 -> 5,
        # dedupe 40 ms -> 0.4-2.9 s per batch). Without an arrival (0), the driver's clock bounds it.
        arrivals = batch.arrivals[rows]
        bounds = np.where(arrivals != 0, arrivals, to_micros(datetime.now(UTC)))
        self.high_water = max(self.high_water, int(np.minimum(batch.times[rows], bounds).max()))
        self._evict()

    def _evict(self) -> None:
        """Drop what no batch near the high-water mark can need (older than two lookbacks).

        The mark follows arrival, so an event claiming a far-future time stays (a retry finds it)
        while what arrived in time is kept as long as the lookback asks.
        """
        cutoff = self.high_water - 2 * self.lookback_us
        if cutoff <= self.low:
            return
        keep = self.times >= cutoff
        self.hi, self.lo, self.times = self.hi[keep], self.lo[keep], self.times[keep]
        self.low = cutoff


@dataclass
class IndexSet:
    """The committed ids of several tables (the events table and, with a routing, every routed table), as one index.

    One :class:`CommittedIndex` per table follows that table's snapshots and loads its rows; an id
    counts as committed if any table holds it. The ids a batch commits are learned by the first
    table's index whatever table they went to, so a reset of any one index (another writer
    changed its table) resets them all: no learned id outlives the check of its table.
    """

    query_id: str
    lookback_us: int
    tables: tuple[str, ...]
    parts: dict[str, CommittedIndex] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for table in self.tables:
            self.include(table)

    def include(self, table: str) -> None:
        """Also answer for ``table`` (a routed table found or created); it loads when next asked."""
        if table not in self.parts:
            self.parts[table] = CommittedIndex(table, self.query_id, self.lookback_us)

    @property
    def _first(self) -> CommittedIndex:
        return next(iter(self.parts.values()))

    @property
    def loads(self) -> int:
        """Times rows were read from the tables."""
        return sum(part.loads for part in self.parts.values())

    @property
    def loaded_rows(self) -> int:
        """Rows read from the tables."""
        return sum(part.loaded_rows for part in self.parts.values())

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts.values())

    def reset(self) -> None:
        """Forget everything: the next batch loads from the tables again."""
        for part in self.parts.values():
            part.reset()

    def sync(self, spark: SparkSession) -> None:
        """Check every table still holds what its index says; reset all if one does not."""
        for part in self.parts.values():
            known = part.snapshot_id
            part.sync(spark)
            if known is not None and part.snapshot_id is None:
                self.reset()
                return

    def ensure_from(self, spark: SparkSession, start: int) -> None:
        """Make every table's index hold its committed rows with event time >= ``start``."""
        for part in self.parts.values():
            part.ensure_from(spark, start)

    def window(self, batch: Batch) -> tuple[int, int]:
        """The event-time window committed rows are compared in (see :meth:`CommittedIndex.window`)."""
        return self._first.window(batch)

    def committed(self, batch: Batch, start: int, end: int) -> np.ndarray:
        """Batch entries whose id some table holds with an event time in ``[start, end]``."""
        found = [part.committed(batch, start, end) for part in self.parts.values()]
        return np.unique(np.concatenate(found)).astype(np.int64) if found else np.empty(0, dtype=np.int64)

    def add(self, batch: Batch, rows: np.ndarray) -> None:
        """Learn the ids of ``rows`` of ``batch``: they were just committed by this query (to any table)."""
        self._first.add(batch, rows)


def duplicates(index: CommittedIndex | IndexSet, batch: Batch, spark: SparkSession) -> np.ndarray:
    """Entries of ``batch`` to drop: ids committed within the window, then later copies in the batch."""
    if not len(batch):
        return np.empty(0, dtype=np.int64)
    start, end = index.window(batch)
    index.sync(spark)
    index.ensure_from(spark, start)
    seen = index.committed(batch, start, end)
    rest = np.setdiff1d(np.arange(len(batch), dtype=np.int64), seen, assume_unique=True)
    return np.union1d(seen, batch.later_copies(rest))


def digest_batches(batches: Iterable[Any]) -> Iterator[Any]:
    """``mapInArrow`` function: ``(event_id, event_ts)`` batches in, ``(hi, lo, times)`` out."""
    import pyarrow as pa

    for batch in batches:
        blob = b"".join(digest(value) for value in batch.column(0).to_pylist())
        pairs = np.frombuffer(blob, dtype="<i8").reshape(-1, 2)
        times = batch.column(1).cast(pa.int64())
        yield pa.RecordBatch.from_arrays(
            [pa.array(pairs[:, 0], type=pa.int64()), pa.array(pairs[:, 1], type=pa.int64()), times],
            names=["hi", "lo", "times"],
        )
