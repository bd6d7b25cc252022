"""What one batch did, typed: :class:`BatchProgress` per batch, made of each shard's ``ReadStats``.

The engine fills these objects; only at the edge, when a batch is reported, does a batch become
the dict that ``IngestQuery.recent_progress``, the ``on_progress`` callback and the JSON-lines file
``<run_dir>/ingest_progress.jsonl`` carry (:meth:`BatchProgress.as_dict`). Those keys follow
Spark's ``StreamingQueryProgress`` where one exists (``num_input_rows``, ``duration_ms``...) and
are read by the notebooks, ``ingest.report``, the CLI and the benchmarks: they do not change.

A shard's :class:`~icestream.ingest.reading.read_stats.ReadStats` is what its read task sends the
driver (:mod:`icestream.ingest.reading.read_stats`, the wire format).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from icestream.ingest.reading.read_stats import ReadStats

PROGRESS_FILE = "ingest_progress.jsonl"
RECENT_BATCHES = 100  # how many batches ``recent_progress`` keeps (Spark keeps 100 too)


@dataclass(frozen=True)
class IndexStats:
    """The dedupe index after a batch (see :class:`icestream.ingest.dedupe.CommittedIndex`)."""

    ids: int  # committed ids it holds
    loads: int  # times it read rows from the table
    loaded_rows: int


Phase = Literal["plan", "read", "parse", "dedupe", "evolve", "write_rejects", "write_events", "metrics", "total"]


@dataclass
class PhaseSeconds:
    """Seconds each phase of a batch took (reported in milliseconds, as ``duration_ms``)."""

    plan: float = 0.0  # ListShards and the shard plans (0 for a read done ahead)
    read: float = 0.0  # the read: GetRecords, parsing, keeping the rows (a Spark job, or the driver at the tip)
    parse: float = 0.0  # of which parsing, summed over the read tasks
    dedupe: float = 0.0
    evolve: float = 0.0  # schema evolution: deciding new columns, their DDL (0 when off or no new field)
    write_rejects: float = 0.0
    write_events: float = 0.0
    metrics: float = 0.0  # the metrics table's refresh (lake.metrics_table), with --metrics
    total: float = 0.0

    @contextlib.contextmanager
    def timing(self, phase: Phase) -> Iterator[None]:
        """Add the seconds the ``with`` block takes to ``phase`` (not when it raises: the batch is void then)."""
        began = time.monotonic()
        yield
        setattr(self, phase, getattr(self, phase) + time.monotonic() - began)


@dataclass
class BatchProgress:
    """One batch, filled in as it runs: read by the source, written by the sink, timed by the query."""

    query_id: str
    batch_id: int
    started: datetime
    shards: list[ReadStats] = field(default_factory=list)
    capped: bool = False  # some shard hit max_records_per_shard: more data is waiting
    dropped: Counter[str] = field(default_factory=Counter)  # per shard: duplicates found on the driver
    written: int = 0  # events committed
    rejected: int = 0  # rejects committed
    transform_dropped: int = 0  # events the transform removed
    schema_changes: dict[str, str] = field(default_factory=dict)  # per table: columns added or widened (ingest.evolve)
    events_snapshot_id: int | None = None
    rejects_snapshot_id: int | None = None
    metrics_snapshot_id: int | None = None  # the metrics table's commit after this batch (with --metrics)
    durations: PhaseSeconds = field(default_factory=PhaseSeconds)
    dedupe_index: IndexStats | None = None
    prefetched: bool = False  # its read ran while the previous batch committed
    on_driver: bool = False  # read at the tip by the driver, without a Spark job (ingest.tip_read)
    ingest_ts: datetime | None = None  # every row's ingest_ts (report.freshness finds rows by it)
    input_rows_per_second: float = 0.0
    processed_rows_per_second: float = 0.0
    driver_heap_mib: dict[str, float] | None = None  # after the batch: used, committed, max (runtime.handles)

    @property
    def num_input_rows(self) -> int:
        """Records read from Kinesis."""
        return sum(stats.read for stats in self.shards)

    @property
    def deduplicated(self) -> int:
        """Events dropped as repeats, in the read tasks and on the driver."""
        return sum(stats.deduplicated for stats in self.shards) + sum(self.dropped.values())

    @property
    def replayed(self) -> int:
        """Records read again that their table already held."""
        return sum(stats.replayed_events + stats.replayed_rejects for stats in self.shards)

    @property
    def event_times_cut(self) -> int:
        """New events whose time was cut to microseconds (``event_ts`` had non-zero digits below one)."""
        return sum(stats.event_times_cut for stats in self.shards)

    @property
    def millis_behind_latest(self) -> int | None:
        """The largest lag any shard reported (None when none did)."""
        behind = [stats.millis_behind for stats in self.shards if stats.millis_behind is not None]
        return max(behind) if behind else None

    @property
    def millis_behind_before_read(self) -> int | None:
        """The largest lag any shard had when the batch's read began (None when none was measured)."""
        behind = [stats.behind_before_ms for stats in self.shards if stats.behind_before_ms is not None]
        return max(behind) if behind else None

    @property
    def caught_up(self) -> bool:
        """Every shard is at its tip and nothing more is known to wait."""
        # A shard that just ended makes its children readable: that is more data, not the end.
        at_tip = all(stats.millis_behind == 0 for stats in self.shards if stats.millis_behind is not None)
        return not self.capped and at_tip and not any(stats.finished for stats in self.shards)

    def set_rates(self, began: float, ended: float, previous_began: float | None) -> None:
        """Input and processing rates, as Spark's ``StreamingQueryProgress`` defines them.

        The input rate divides this batch's rows by the time from the previous trigger to this one
        (what arrived in that interval is what this batch read), not by the time since the previous
        batch began up to this one's end, which counted this batch's own processing twice. The first
        batch has no previous trigger; its input rate is its processing rate.

        Args:
            began: This batch's start (monotonic seconds).
            ended: Its end.
            previous_began: The previous batch's start, None for the first batch.
        """
        processing = max(ended - began, 1e-6)
        interval = processing if previous_began is None else max(began - previous_began, 1e-6)
        self.input_rows_per_second = round(self.num_input_rows / interval, 1)
        self.processed_rows_per_second = round(self.num_input_rows / processing, 1)

    def as_dict(self) -> dict[str, Any]:
        """The progress as reported: the keys of ``recent_progress`` and the JSON-lines file."""
        reasons: Counter[str] = Counter()
        for stats in self.shards:
            reasons.update(stats.reasons)
        arrivals = [moment for stats in self.shards for moment in (stats.first_arrival, stats.last_arrival) if moment]
        progress: dict[str, Any] = {
            "id": self.query_id,
            "batch_id": self.batch_id,
            "timestamp": self.started.isoformat(),
            "num_input_rows": self.num_input_rows,
            "written": self.written,
            "rejected": self.rejected,
            "deduplicated": self.deduplicated,
            "replayed": self.replayed,
            "event_times_cut": self.event_times_cut,
            "transform_dropped": self.transform_dropped,
            "schema_changes": dict(self.schema_changes),
            "duration_ms": {phase: round(seconds * 1000, 1) for phase, seconds in asdict(self.durations).items()},
            "millis_behind_latest": self.millis_behind_latest,
            "millis_behind_before_read": self.millis_behind_before_read,
            "caught_up": self.caught_up,
            "events_snapshot_id": self.events_snapshot_id,
            "rejects_snapshot_id": self.rejects_snapshot_id,
            "metrics_snapshot_id": self.metrics_snapshot_id,
            "reject_reasons": dict(reasons),
            "first_arrival": min(arrivals) if arrivals else None,
            "last_arrival": max(arrivals) if arrivals else None,
            "shards": {stats.shard_id: stats.shard_report(self.dropped[stats.shard_id]) for stats in self.shards},
        }
        if self.dedupe_index is not None:
            progress["dedupe_index"] = asdict(self.dedupe_index)
        progress["prefetched"] = self.prefetched
        progress["read_on"] = "driver" if self.on_driver else "spark"
        progress["ingest_ts"] = self.ingest_ts.isoformat() if self.ingest_ts is not None else None
        progress["input_rows_per_second"] = self.input_rows_per_second
        progress["processed_rows_per_second"] = self.processed_rows_per_second
        progress["driver_heap_mib"] = self.driver_heap_mib
        return progress


def arrival_properties(shards: list[ReadStats]) -> dict[str, str]:
    """The batch's oldest and newest Kinesis arrival, epoch milliseconds, as snapshot-summary values.

    With the snapshot's ``committed_at`` they give the batch's arrival -> commit lag
    (``icestream.queries.report.batch_freshness``). Empty when no shard reported an arrival.
    """
    firsts = [stats.first_arrival for stats in shards if stats.first_arrival is not None]
    lasts = [stats.last_arrival for stats in shards if stats.last_arrival is not None]
    if not firsts or not lasts:
        return {}
    from icestream.lake.summary import (  # on the driver only: read tasks ship this module
        FIRST_ARRIVAL_KEY,
        LAST_ARRIVAL_KEY,
    )

    return {FIRST_ARRIVAL_KEY: str(round(min(firsts) * 1000)), LAST_ARRIVAL_KEY: str(round(max(lasts) * 1000))}


class ProgressLog:
    """Where reported batches go: the recent ones in memory, a JSON-lines file, a callback."""

    def __init__(self, path: Path, on_progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.path = path
        self.on_progress = on_progress
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_BATCHES)

    def record(self, progress: BatchProgress) -> None:
        """Report one finished batch."""
        reported = progress.as_dict()
        self.recent.append(reported)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as sink:
            sink.write(json.dumps(reported, separators=(",", ":")) + "\n")
        if self.on_progress is not None:
            with contextlib.suppress(Exception):  # a display callback must never stop the ingest
                self.on_progress(reported)
