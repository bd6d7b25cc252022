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

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.ingest import dedupe
from icestream.ingest import positions as pos
from icestream.ingest import schema_evolution as evo
from icestream.ingest.commits import Appended, CommitStamp, TableWriter, WrittenTable
from icestream.ingest.options import IngestOptions
from icestream.ingest.progress import BatchProgress, IndexStats, PhaseSeconds, arrival_properties
from icestream.ingest.reading.planner import ReadBatch, TablePositions
from icestream.ingest.routing import TARGET_COLUMN, claim_tables, remember_routed_table, routed_tables
from icestream.ingest.transform import REJECT_COLUMNS, after_committed, done_ids, reject_rows, run_transform
from icestream.lake.inspect import load_iceberg_table
from icestream.lake.schema import spark_fields, table_columns
from icestream.lake.table_evolution import align_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructField

ARCHIVE_SELECT = (
    "raw_data AS data",
    "shard_id",
    "sequence_number",
    "partition_key",
    "arrival_ts",
    "ingest_ts",
    "batch_id",
)


@dataclass(frozen=True)
class SinkTables:
    """The stream a :class:`TableSink` writes from and the tables it writes, named once from the settings."""

    stream_name: str
    events: str
    rejects: str
    archive: str | None = None  # the raw archive, when the query keeps one (the caller creates it)
    # With a routing: the settings that name its tables (config is the one place a table's name is built).
    route_naming: Settings | None = None


@dataclass(frozen=True)
class Routed:
    """The batch's events split by route (:meth:`TableSink._route`)."""

    frames: evo.Frames  # per table: its rows past its own positions, and how many (None: every new event)
    unknown: DataFrame | None = None  # rows whose route names no table (when unknown values are rejected)
    kinds: dict[str, evo.Kinds] | None = None  # per table: its new fields' kinds (with schema evolution)


@dataclass(frozen=True)
class Prepared:
    """A batch's rows made ready to write (:meth:`TableSink._prepare`)."""

    frames: evo.Frames  # per events table: its rows, and how many (None: every new event)
    routed: DataFrame | None  # rows the transform, the route or a type conflict sends to the rejects
    batch: dedupe.Batch | None  # the ids of the batch's new events, with dedupe on
    dropped: np.ndarray | None  # which of them repeat an event already seen
    drop: set[str]  # the dropped rows, as "shard_id:ordinal"
    new_events: int  # events new to the tables, before the transform
    schema_changes: dict[str, str]  # per table: the columns added or widened for this batch


@dataclass(frozen=True)
class RejectsCommit:
    """The rejects table's part of a batch (:meth:`TableSink._commit_rejects`)."""

    appended: Appended | None  # None: no commit was due
    routed_rows: int  # rows the transform, the route or evolution sent there (the reader's aside)


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
        tables: SinkTables,
        options: IngestOptions,
        query_id: str,
        stream_created: str,
    ) -> None:
        """Check both tables exist.

        Args:
            spark: The session.
            tables: The stream and the tables.
            options: The query's options.
            query_id: Written into every commit, to find this query's own snapshots.
            stream_created: The stream's creation time, written into every commit.

        Raises:
            ConfigError: If a table does not exist.
        """
        self.spark = spark
        self.options = options
        self.stamp = CommitStamp(tables.stream_name, stream_created, query_id)  # in every commit's summary
        self.writer = TableWriter(spark, self.stamp, options.position_commit_seconds, options.changes, tables.events)
        self.events = WrittenTable(tables.events)
        self.rejects = WrittenTable(tables.rejects)
        self.archive = WrittenTable(tables.archive) if tables.archive is not None else None
        for table in (self.events, self.rejects):
            if not spark.catalog.tableExists(table.name):
                raise ConfigError(
                    f"Table {table.name} does not exist. Create it with `icestream setup` (or notebook 00)."
                )
        lookback = options.dedupe_lookback // timedelta(microseconds=1)
        # With a routing, an id counts as committed in any routed table: a repeat of an event has its
        # route too, so dedupe across the tables is dedupe within each (see dedupe.IndexSet).
        self.index = dedupe.IndexSet(query_id, lookback, (tables.events,))
        self.routing = options.routing
        self._naming = tables.route_naming
        if self.routing is not None and self._naming is None:
            raise ValueError("a routing needs the settings that name its tables (SinkTables.route_naming)")
        self.routed: dict[str, WrittenTable] = {self.events.name: self.events}  # every table events go to, by name
        self.refused: dict[str, str] = {}  # route keys naming a table the route does not own, and why
        self._fields: dict[str, tuple[int, list[StructField]]] = {}  # per table: its schema id and columns
        # Schema evolution keeps the new fields (and, for a reject, the payload) beside the table's columns.
        self._keep = (evo.EXTRAS_COLUMN, "raw_data") if options.schema_evolution != "off" else ()
        self.evolution = None
        if options.schema_evolution != "off":
            self.evolution = evo.PayloadEvolution(spark, options.schema_evolution, self._table_fields, self._fields.pop)

    @property
    def _route_naming(self) -> Settings:
        """The settings that name the routed tables (only a sink with a routing asks)."""
        assert self._naming is not None  # checked in __init__ for a sink with a routing
        return self._naming

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
        name, created = self.stamp.stream_name, self.stamp.stream_created
        names = [self.events.name]
        if self.routing is not None:
            names = routed_tables(self.spark, self._route_naming, self.routing, name)
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
            pos.mark_source_stream(self.spark, table.name, self.stamp.stream_name, self.stamp.stream_created)

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
        durations = progress.durations
        prepared = self._prepare(read, new_positions, durations)
        progress.dropped.update(key.rsplit(":", 1)[0] for key in prepared.drop)
        arrivals = arrival_properties(read.shards)
        with durations.timing("write_rejects"):
            self._archive_batch(read, new_positions, arrivals, fault)
            rejects = self._commit_rejects(read, prepared, new_positions, arrivals)
        fault("between_commits", read.batch_id)
        with durations.timing("write_events"):
            written = self._commit_events(read, prepared, new_positions, arrivals, fault)
            if written and prepared.batch is not None and prepared.dropped is not None:
                self._learn(prepared.batch, prepared.dropped, rejects.routed_rows > 0)
        fault("after_commit", read.batch_id)
        self._report(progress, prepared, rejects, written)

    def _prepare(self, read: ReadBatch, new_positions: dict[str, str], durations: PhaseSeconds) -> Prepared:
        """The batch's rows made ready: repeats dropped, the transform run, routed, evolved and aligned."""
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        with durations.timing("dedupe"):
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
            route = Routed({self.events.name: (events, None)})  # one table, every new event
            if self.routing is not None:
                route = self._route(events, read, new_positions)
                routed = evo.union(routed, route.unknown)
        frames = route.frames
        changes: dict[str, str] = {}  # per table: the columns this batch adds or widens
        with durations.timing("evolve"):
            if self.evolution is not None:
                frames, conflicts, changes = self.evolution.split(frames, read.shards, route.kinds, read.batch_id)
                routed = evo.union(routed, conflicts)
                self.writer.schema_changes.update(changes)
        with durations.timing("dedupe"):
            if routed is not None:
                # Rows the rejects table already holds (a retry after a crash past its commit) are left out.
                marks = {plan.shard_id: plan.rejects_committed for plan in read.plans}
                routed = routed.where(after_committed(marks, done_ids(marks, read.shards)))
            if self.options.changes is None:  # a change stream's rows are folded and merged by the writer
                frames = {name: (self._aligned(frame, name), rows) for name, (frame, rows) in frames.items()}
        new_events = sum(stats.good - stats.replayed_events - stats.deduplicated for stats in read.shards) - len(drop)
        return Prepared(frames, routed, batch, dropped, drop, new_events, changes)

    def _archive_batch(
        self,
        read: ReadBatch,
        new_positions: dict[str, str],
        arrivals: dict[str, str],
        fault: Callable[[str, int], None],
    ) -> None:
        """With the raw archive on: every record read, first, so it is never behind the other tables."""
        if self.archive is None:
            return
        archived = sum(stats.archived for stats in read.shards)
        self.writer.append(
            self.archive,
            read.kept("raw").selectExpr(*ARCHIVE_SELECT),
            archived,
            pos.furthest(new_positions, self.archive.committed),
            read.batch_id,
            arrivals,
        )
        fault("after_archive", read.batch_id)

    def _commit_rejects(
        self, read: ReadBatch, prepared: Prepared, new_positions: dict[str, str], arrivals: dict[str, str]
    ) -> RejectsCommit:
        """The batch's rejects (the reader's and those the transform, route or evolution sent), committed."""
        routed = prepared.routed
        new_rejects = sum(stats.rejected - stats.replayed_rejects for stats in read.shards)
        routed_rows = routed.count() if routed is not None else 0  # runs the transform once more, over kept rows
        if not self.writer.due(self.rejects, new_rejects + routed_rows, new_positions):
            return RejectsCommit(None, routed_rows)
        # Built only for a commit: a clean batch's rejects frame cost a DataFrame's analysis for nothing.
        rows = read.kept("reject").select(*REJECT_COLUMNS)
        rows = rows.unionByName(routed) if routed is not None and routed_rows else rows
        appended = self.writer.append(
            self.rejects, rows, new_rejects + routed_rows, new_positions, read.batch_id, arrivals
        )
        return RejectsCommit(appended, routed_rows)

    def _commit_events(
        self,
        read: ReadBatch,
        prepared: Prepared,
        new_positions: dict[str, str],
        arrivals: dict[str, str],
        fault: Callable[[str, int], None],
    ) -> dict[str, Appended]:
        """Each events table's rows, committed in name order; a table without rows commits due positions."""
        written: dict[str, Appended] = {}
        for number, name in enumerate(sorted(self.routed)):
            if number:
                fault("between_tables", read.batch_id)
            frame, rows = prepared.frames.get(name, (None, 0))
            rows = prepared.new_events if rows is None else rows
            if frame is None and self.writer.due(self.routed[name], 0, new_positions):
                frame = self.spark.table(name).limit(0)  # a commit of positions only
            if frame is not None:
                appended = self.writer.append(self.routed[name], frame, rows, new_positions, read.batch_id, arrivals)
                written.update({name: appended} if appended is not None else {})
        return written

    def _report(
        self, progress: BatchProgress, prepared: Prepared, rejects: RejectsCommit, written: dict[str, Appended]
    ) -> None:
        """What the batch committed, into its progress."""
        progress.schema_changes.update(prepared.schema_changes)
        if self.options.dedupe:
            progress.dedupe_index = IndexStats(len(self.index), self.index.loads, self.index.loaded_rows)
        if rejects.appended is not None:
            progress.rejects_snapshot_id, progress.rejected = rejects.appended.snapshot_id, rejects.appended.rows
        if written:
            events_commit = written.get(self.events.name) or written[max(written)]
            progress.events_snapshot_id = events_commit.snapshot_id
            progress.written = sum(appended.rows for appended in written.values())
            if all(appended.snapshot_id is not None for appended in written.values()):
                progress.transform_dropped = max(0, prepared.new_events - progress.written - rejects.routed_rows)

    def commit_positions(self, positions: dict[str, str], batch_id: int) -> int:
        """At a graceful stop: commit the query's processed ``positions`` (no rows) to each table whose
        last commit carries others, as a periodic commit of positions does; return how many committed."""
        committed = 0
        for table in self.tables:
            target = pos.furthest(positions, table.committed) if table is self.archive else positions
            if positions and table.committed != target:
                self.writer.write(table, self.spark.table(table.name).limit(0), 0, target, batch_id, {})
                committed += 1
        return committed

    def _route(self, events: DataFrame, read: ReadBatch, new_positions: dict[str, str]) -> Routed:
        """Split the batch's events by route: per table its rows past the table's own positions, and
        the rows whose route names no table (when unknown values are rejected).

        A table seen for the first time is claimed (``routing.claim_tables``) before any table commits
        this batch (one the route does not own: its values are unknown), then commits the batch's start
        positions: a restart reads from there at the latest (see docs/ingest.md). With schema evolution
        on and new fields in the batch, the same job that counts each table's rows counts its new
        fields' kinds (None otherwise).
        """
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        routing = self.routing
        assert routing is not None
        events, refused = events.select(*table_columns(), *self._keep), None
        while refused is None or refused:  # keyed again (one more job) when a new table is refused
            self.refused.update(refused or {})
            keyed = routing.keyed(events, self.refused)
            if self._keep and any(stats.extra_kinds for stats in read.shards):
                counts, kinds = evo.count_routes(keyed, TARGET_COLUMN, partial(routing.table_name, self._route_naming))
            else:
                counts, kinds = {row[0]: int(row[1]) for row in keyed.groupBy(TARGET_COLUMN).count().collect()}, None
            refused = claim_tables(
                self.spark, self._route_naming, routing, [key for key in counts if key is not None], self.routed
            )
        frames: evo.Frames = {}
        for key in sorted(key for key in counts if key is not None):
            table = self._routed_table(routing.table_name(self._route_naming, key), read, new_positions)
            marks = {shard: pos.committed_mark(position) for shard, position in table.committed.items()}
            rows = keyed.where((F.col(TARGET_COLUMN) == key) & after_committed(marks, done_ids(marks, read.shards)))
            frames[table.name] = (rows.select(*table_columns(), *self._keep), counts[key])
        unknown = None
        if counts.get(None):
            unknown = reject_rows(routing.rejected(keyed, self._route_naming, self.refused), read.batch_id)
        return Routed(frames, unknown, kinds)

    def _routed_table(self, name: str, read: ReadBatch, new_positions: dict[str, str]) -> WrittenTable:
        """The routed table ``name``, once claimed: the batch's start positions committed on first sight."""
        if name in self.routed:
            return self.routed[name]
        stream, created = self.stamp.stream_name, self.stamp.stream_created
        pos.mark_source_stream(self.spark, name, stream, created)
        remember_routed_table(self.spark, self._route_naming, name)
        table = WrittenTable(name, dict(pos.load_committed(self.spark, name, stream, created).positions))
        if not table.committed:
            # It holds nothing: it claims only what every table held when this batch began.
            start = {**new_positions, **{plan.shard_id: plan.start for plan in read.plans}}
            self.writer.write(table, self.spark.table(name).limit(0), 0, start, read.batch_id - 1, {})
        self.routed[name] = table
        self.index.include(name)
        return table

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
