"""The ingest's sink side: dedupe, align and commit a batch's rows together with its positions.

For each batch :class:`TableSink` drops the events already seen (across shards of the batch, and
against rows committed within ``dedupe_lookback``, from the driver's index of committed ids: see
:mod:`icestream.ingest.dedupe`), runs the user's transform, aligns the events with the table's
current columns, then appends the rejects and then the events, each with
``writeTo(...).append()``. The new per-shard positions ride in the snapshot summary of that same
commit, so a table's data and its position can never disagree. A restart (or a batch retry)
reloads both tables' positions (:meth:`TableSink.recover`), re-reads from the earlier of the two,
and each table skips what it already holds: nothing is lost or written twice, whichever moment a
crash hits.

With a routing (:mod:`icestream.ingest.routing`) the events go to several tables instead of one:
every routed table is one more table of the same kind, committed in name order after the rejects.
Reading restarts from the earliest of all their positions, and each table keeps only the rows
past its own (:func:`~icestream.ingest.transform.after_committed`, by id inside a KPL aggregate).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.ingest import dedupe
from icestream.ingest import evolve as evo
from icestream.ingest import positions as pos
from icestream.ingest.changes import apply_changes
from icestream.ingest.commits import (
    SNAPSHOT_PROPERTY,
    Appended,
    CommitStamp,
    WrittenTable,
    commit_due,
    commit_properties,
    find_commit,
)
from icestream.ingest.options import IngestOptions
from icestream.ingest.progress import BatchProgress, IndexStats, arrival_properties
from icestream.ingest.routing import TARGET_COLUMN, claim_tables, remember_routed_table, routed_tables
from icestream.ingest.source import ReadBatch, TablePositions
from icestream.ingest.transform import REJECT_COLUMNS, after_committed, done_ids, reject_rows, run_transform
from icestream.lake.evolution import align_columns
from icestream.lake.inspect import load_iceberg_table
from icestream.lake.schema import spark_fields, table_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructField

ARCHIVE_SELECT = ("raw_data AS data", "shard_id", "sequence_number", "partition_key", "arrival_ts", "ingest_ts",
                  "batch_id")  # fmt: skip
# Rows one write task takes: a batch at the default cap (10,000 per shard) is one task per table.
# A hash shuffle first (the tables' own write.distribution-mode) cost about 0.2 s per batch here.
WRITE_ROWS_PER_TASK = 250_000


@dataclass(frozen=True)
class Recovered:
    """What both tables say after a (re)start: where to read from, and the next batch id."""

    processed: TablePositions
    sources: dict[str, str]  # per table ("events", "rejects"): snapshot, data, none or stream recreated
    next_batch_id: int


class TableSink:
    """Writes batches to the events and rejects tables (see the module docstring)."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        options: IngestOptions,
        query_id: str,
        stream_created: str,
        archive: str | None = None,
    ) -> None:
        """Check both tables exist.

        Args:
            spark: The session.
            settings: Name the tables and the stream.
            options: The query's options.
            query_id: Written into every commit, to find this query's own snapshots.
            stream_created: The stream's creation time, written into every commit.
            archive: The raw archive's name when the query keeps one (the caller creates it).

        Raises:
            ConfigError: If a table does not exist.
        """
        self.spark = spark
        self.settings = settings
        self.options = options
        self.query_id = query_id
        self.stream_created = stream_created
        self.events = WrittenTable(settings.table_name)
        self.rejects = WrittenTable(settings.rejects_table_name)
        self.archive = WrittenTable(archive) if archive is not None else None
        for table in (self.events, self.rejects):
            if not spark.catalog.tableExists(table.name):
                raise ConfigError(
                    f"Table {table.name} does not exist. Create it with `icestream setup` (or notebook 00)."
                )
        lookback = options.dedupe_lookback // timedelta(microseconds=1)
        # With a routing, an id counts as committed in any routed table: a repeat of an event has its
        # route too, so dedupe across the tables is dedupe within each (see dedupe.IndexSet).
        self.index = dedupe.IndexSet(query_id, lookback, (settings.table_name,))
        self.routing = options.routing
        self.routed: dict[str, WrittenTable] = {self.events.name: self.events}  # every table events go to, by name
        self.refused: dict[str, str] = {}  # route keys naming a table the route does not own, and why
        self._fields: dict[str, tuple[int, list[StructField]]] = {}  # per table: its schema id and columns
        self._schema_changes: dict[str, str] = {}  # per table: the changes its next data commit names
        # Schema evolution keeps the new fields (and, for a reject, the payload) beside the table's columns.
        self._keep = (evo.EXTRAS_COLUMN, "raw_data") if options.schema_evolution != "off" else ()
        self.evolution = None
        if options.schema_evolution != "off":
            self.evolution = evo.PayloadEvolution(spark, options.schema_evolution, self._table_fields, self._fields.pop)

    @property
    def tables(self) -> tuple[WrittenTable, ...]:
        """The tables it writes, in commit order: the raw archive (when on), rejects, the events table(s)."""
        first = (self.archive, self.rejects) if self.archive is not None else (self.rejects,)
        return (*first, *(self.routed[name] for name in sorted(self.routed)))

    @property
    def committed(self) -> TablePositions:
        """The positions each table's last commit carried (the events side: the earliest of the routed tables)."""
        archive = self.archive.committed if self.archive is not None else {}
        marks = [table.committed for table in self.routed.values()]
        events = pos.earliest_of(marks) if self.routing is not None else self.events.committed
        inside = pos.inside_aggregates([self.rejects.committed, *(marks if self.routing is not None else ())])
        return TablePositions(events, self.rejects.committed, archive, inside)

    def recover(self) -> Recovered:
        """Load what every table committed: the start path, also used before a batch retry."""
        name, created = self.settings.stream_name, self.stream_created
        names = [self.events.name]
        if self.routing is not None:
            names = routed_tables(self.spark, self.settings, self.routing, name)
        loaded = {table: pos.load_committed(self.spark, table, name, created) for table in names}
        rejects = pos.load_committed(self.spark, self.rejects.name, name, created)
        self.routed = {table: self.events if table == self.events.name else WrittenTable(table) for table in names}
        for table, committed in loaded.items():
            self.routed[table].committed = dict(committed.positions)
            self.index.include(table)
        self.rejects.committed = dict(rejects.positions)
        if self.archive is not None:
            self.archive.committed = dict(pos.load_committed(self.spark, self.archive.name, name, created).positions)
        self.index.reset()  # it is filled from the tables again when the next batch needs it
        sources = {"events": loaded[self.events.name].source, "rejects": rejects.source}
        sources.update({table: committed.source for table, committed in loaded.items() if table != self.events.name})
        return Recovered(
            TablePositions(dict(self.committed.events), dict(rejects.positions)),
            sources,
            max(rejects.batch_id, *(committed.batch_id for committed in loaded.values())) + 1,
        )

    def mark_source(self) -> None:
        """Record in both tables which stream (and incarnation) feeds them."""
        for table in self.tables:
            pos.mark_source_stream(self.spark, table.name, self.settings.stream_name, self.stream_created)

    def commit(
        self,
        read: ReadBatch,
        new_positions: dict[str, str],
        progress: BatchProgress,
        fault: Callable[[str, int], None],
    ) -> None:
        """Dedupe, align and commit one batch: rejects first, then the events table(s), each with its positions.

        Args:
            read: The batch's kept rows and per-shard stats.
            new_positions: Where every shard stands once this batch is committed.
            progress: Filled in: counts, snapshots, dedupe and write durations.
            fault: Called with ``("after_archive" | "between_commits" | "between_tables" | "after_commit",
                batch_id)``; ``between_tables`` after each routed table but the last.
        """
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        mark = time.monotonic()
        events = read.kept("event")
        batch, dropped = self._duplicates(read.packed) if self.options.dedupe else (None, None)
        drop = batch.keys(dropped) if batch is not None and dropped is not None else set()
        if drop:
            events = events.where(~F.concat_ws(":", "shard_id", "ordinal").isin(sorted(drop)))
        routed = None
        if self.options.transform is not None:
            events, routed = run_transform(
                self.options.transform, events.select(*table_columns(), *self._keep), read.batch_id, self._keep
            )
        frames: evo.Frames = {self.events.name: (events, None)}  # table -> (its rows, how many; None: every new event)
        table_kinds = None
        if self.routing is not None:
            frames, unknown, table_kinds = self._route(events, read, new_positions)
            routed = evo.union(routed, unknown)
        evolve_mark = time.monotonic()
        if self.evolution is not None:
            frames, conflicts, changes = self.evolution.split(frames, read.shards, table_kinds, read.batch_id)
            routed = evo.union(routed, conflicts)
            progress.schema_changes.update(changes)
            self._schema_changes.update(changes)
        evolve_seconds = time.monotonic() - evolve_mark
        if routed is not None:
            # Rows the rejects table already holds (a retry after a crash past its commit) are left out.
            marks = {plan.shard_id: plan.rejects_committed for plan in read.plans}
            routed = routed.where(after_committed(marks, done_ids(marks, read.shards)))
        if self.options.changes is None:  # a change stream's rows are folded and merged by _write
            frames = {name: (self._aligned(frame, name), rows) for name, (frame, rows) in frames.items()}
        progress.dropped.update(key.rsplit(":", 1)[0] for key in drop)
        progress.durations.evolve = evolve_seconds
        progress.durations.dedupe = time.monotonic() - mark - evolve_seconds

        new_rejects = sum(stats.rejected - stats.replayed_rejects for stats in read.shards)
        arrivals = arrival_properties(read.shards)
        new_events = sum(stats.good - stats.replayed_events - stats.deduplicated for stats in read.shards) - len(drop)
        mark = time.monotonic()
        if self.archive is not None:
            # First, so it is never behind the other two: every record read is archived exactly once.
            archived = sum(stats.archived for stats in read.shards)
            self._append(
                self.archive, read.kept("raw").selectExpr(*ARCHIVE_SELECT), archived,
                pos.furthest(new_positions, self.archive.committed), read.batch_id, arrivals,
            )  # fmt: skip
            fault("after_archive", read.batch_id)
        routed_count = routed.count() if routed is not None else 0  # runs the transform once more, over kept rows
        rejects = None
        if self._commit_due(self.rejects, new_rejects + routed_count, new_positions):
            # Built only for a commit: a clean batch's rejects frame cost a DataFrame's analysis for nothing.
            reject_rows = read.kept("reject").select(*REJECT_COLUMNS)
            reject_rows = reject_rows.unionByName(routed) if routed is not None and routed_count else reject_rows
            rejects = self._append(
                self.rejects, reject_rows, new_rejects + routed_count, new_positions, read.batch_id, arrivals
            )
        progress.durations.write_rejects = time.monotonic() - mark
        fault("between_commits", read.batch_id)
        mark = time.monotonic()
        written: dict[str, Appended] = {}
        for number, name in enumerate(sorted(self.routed)):
            if number:
                fault("between_tables", read.batch_id)
            frame, rows = frames.get(name, (None, 0))
            rows = new_events if rows is None else rows
            if frame is None and self._commit_due(self.routed[name], 0, new_positions):
                frame = self.spark.table(name).limit(0)  # a commit of positions only
            if frame is not None:
                appended = self._append(self.routed[name], frame, rows, new_positions, read.batch_id, arrivals)
                written.update({name: appended} if appended is not None else {})
        if written and batch is not None and dropped is not None:
            self._learn(batch, dropped, routed_count > 0)
        progress.durations.write_events = time.monotonic() - mark
        fault("after_commit", read.batch_id)
        if self.options.dedupe:
            progress.dedupe_index = IndexStats(len(self.index), self.index.loads, self.index.loaded_rows)

        if rejects is not None:
            progress.rejects_snapshot_id, progress.rejected = rejects.snapshot_id, rejects.rows
        if written:
            events_commit = written.get(self.events.name) or written[max(written)]
            progress.events_snapshot_id = events_commit.snapshot_id
            progress.written = sum(appended.rows for appended in written.values())
            if all(appended.snapshot_id is not None for appended in written.values()):
                progress.transform_dropped = max(0, new_events - progress.written - routed_count)

    def commit_positions(self, positions: dict[str, str], batch_id: int) -> int:
        """At a graceful stop: commit the query's processed ``positions`` (no rows) to each table whose
        last commit carries others, as a periodic commit of positions does; return how many committed."""
        committed = 0
        for table in self.tables:
            target = pos.furthest(positions, table.committed) if table is self.archive else positions
            if positions and table.committed != target:
                self._write(table, self.spark.table(table.name).limit(0), 0, target, batch_id, {})
                committed += 1
        return committed

    def _route(
        self, events: DataFrame, read: ReadBatch, new_positions: dict[str, str]
    ) -> tuple[evo.Frames, DataFrame | None, dict[str, dict[str, dict[str, int]]] | None]:
        """Split the batch's events by route: per table its rows past the table's own positions, and
        the rows whose route names no table (when unknown values are rejected).

        A table seen for the first time is claimed (``routing.claim_tables``) before any table commits
        this batch (one the route does not own: its values are unknown), then commits the batch's start
        positions: a restart reads from there at the latest (see docs/ingest.md). With schema evolution
        on and new fields in the batch, the same job that counts each table's rows counts its new
        fields' kinds (returned third; None otherwise).
        """
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        routing = self.routing
        assert routing is not None
        events, refused = events.select(*table_columns(), *self._keep), None
        while refused is None or refused:  # keyed again (one more job) when a new table is refused
            self.refused.update(refused or {})
            keyed = routing.keyed(events, self.refused)
            if self._keep and any(stats.extra_kinds for stats in read.shards):
                counts, kinds = evo.count_routes(keyed, TARGET_COLUMN, partial(routing.table_name, self.settings))
            else:
                counts, kinds = {row[0]: int(row[1]) for row in keyed.groupBy(TARGET_COLUMN).count().collect()}, None
            refused = claim_tables(self.spark, self.settings, routing, [key for key in counts if key is not None],
                                   self.routed)  # fmt: skip
        frames: evo.Frames = {}
        for key in sorted(key for key in counts if key is not None):
            table = self._routed_table(routing.table_name(self.settings, key), read, new_positions)
            marks = {shard: pos.committed_mark(position) for shard, position in table.committed.items()}
            rows = keyed.where((F.col(TARGET_COLUMN) == key) & after_committed(marks, done_ids(marks, read.shards)))
            frames[table.name] = (rows.select(*table_columns(), *self._keep), counts[key])
        unknown = None
        if counts.get(None):
            unknown = reject_rows(routing.rejected(keyed, self.settings, self.refused), read.batch_id)
        return frames, unknown, kinds

    def _routed_table(self, name: str, read: ReadBatch, new_positions: dict[str, str]) -> WrittenTable:
        """The routed table ``name``, once claimed: the batch's start positions committed on first sight."""
        if name in self.routed:
            return self.routed[name]
        stream, created = self.settings.stream_name, self.stream_created
        pos.mark_source_stream(self.spark, name, stream, created)
        remember_routed_table(self.spark, self.settings, name)
        table = WrittenTable(name, dict(pos.load_committed(self.spark, name, stream, created).positions))
        if not table.committed:
            # It holds nothing: it claims only what every table held when this batch began.
            start = {**new_positions, **{plan.shard_id: plan.start for plan in read.plans}}
            self._write(table, self.spark.table(name).limit(0), 0, start, read.batch_id - 1, {})
        self.routed[name] = table
        self.index.include(name)
        return table

    def _append(
        self,
        table: WrittenTable,
        frame: DataFrame,
        new_rows: int,
        positions: dict[str, str],
        batch_id: int,
        arrivals: dict[str, str],
    ) -> Appended | None:
        """Commit ``frame`` with ``positions``; or nothing, if it has no new rows and no position is due.

        A commit of positions only (see :func:`~icestream.ingest.commits.commit_due`) carries no
        ``arrivals``: its snapshot holds no batch to measure the lag of.
        """
        if not self._commit_due(table, new_rows, positions):
            return None
        return self._write(table, frame, new_rows, positions, batch_id, arrivals)

    def _write(
        self, table: WrittenTable, frame: DataFrame, new_rows: int, positions: dict[str, str], batch_id: int,
        arrivals: dict[str, str],
    ) -> Appended:  # fmt: skip
        """Append ``frame`` to ``table`` in one commit whose snapshot summary carries ``positions``."""
        stamp = CommitStamp(self.settings.stream_name, self.stream_created, self.query_id)
        properties = commit_properties(
            stamp, positions, batch_id, arrivals if new_rows > 0 else {}, self._schema_changes.get(table.name)
        )
        changes = self.options.changes
        if changes is not None and new_rows > 0 and table is self.events:
            prefix = SNAPSHOT_PROPERTY
            summary = {key.removeprefix(prefix): value for key, value in properties.items() if key.startswith(prefix)}
            apply_changes(self.spark, table.name, frame, changes, summary)  # one MERGE, the positions in its commit
        else:
            tasks = max(1, -(-new_rows // WRITE_ROWS_PER_TASK))
            frame.coalesce(tasks).writeTo(table.name).options(**properties).append()
        table.last_commit = time.monotonic()
        table.committed = dict(positions)
        self._schema_changes.pop(table.name, None)
        appended = find_commit(self.spark, table.name, self.query_id, batch_id)
        # A MERGE's added-records counts rewritten rows too: a change stream counts the changes it applied.
        return Appended(appended.snapshot_id, new_rows) if changes is not None and table is self.events else appended

    def _commit_due(self, table: WrittenTable, new_rows: int, positions: dict[str, str]) -> bool:
        return commit_due(table, new_rows, positions, self.options.position_commit_seconds)

    def _duplicates(self, packed: dict[str, bytes]) -> tuple[dedupe.Batch, np.ndarray]:
        """The batch's new events and which of them to drop (first copy wins).

        Within a shard the read task already dropped repeats; this catches repeats across shards
        and against rows committed within the lookback, from the index of committed ids: no Spark
        job unless the index must read the table.
        """
        batch = dedupe.Batch.unpack(packed)
        return batch, dedupe.duplicates(self.index, batch, self.spark)

    def _learn(self, batch: dedupe.Batch, dropped: np.ndarray, some_rejected: bool = False) -> None:
        """Tell the index which ids the events commit(s) just added."""
        if self.options.transform is not None or some_rejected:
            # A transform may drop or change rows, a route reject some: only the tables know what was written.
            self.index.reset()
            return
        kept = np.setdiff1d(np.arange(len(batch), dtype=np.int64), dropped, assume_unique=True)
        self.index.add(batch, kept)

    def _aligned(self, events: DataFrame, table: str) -> DataFrame:
        """Match ``table``'s current columns: schema evolution while streaming (see lake.evolution).

        The table is refreshed every batch (another process may have evolved it), but its Spark
        columns are converted only when its schema id changed: ``spark.table(name).schema`` analysed
        a new DataFrame every batch.
        """
        return align_columns(events, self._table_fields(table), evo.EXTRAS_COLUMN if self._keep else None)

    def _table_fields(self, table: str) -> list[StructField]:
        """``table``'s Spark columns as its current Iceberg schema has them (converted once per schema id)."""
        schema = load_iceberg_table(self.spark, table).schema()
        if table not in self._fields or self._fields[table][0] != schema.schemaId():
            self._fields[table] = (schema.schemaId(), spark_fields(self.spark, schema))
        return self._fields[table][1]
