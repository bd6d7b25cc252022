"""A continuous aggregate: ``real_time_metrics`` kept current from the events table's own commits.

The question "events, unique users and average duration per minute, event type and device" asked
of a growing events table costs a scan of every event each time (11 s over 10M events in Spark on
2 cores). A *metrics table* holds its answer instead, one row per ``(minute, event_type,
device_type)``, and is brought up to date by :func:`refresh_metrics`, which the ingest calls after
every batch (``icestream ingest --metrics``) and a scheduled job can call too (``icestream metrics``).

**Incremental, from the table, not from the stream.** A refresh reads only the events the events
table *appended* since the snapshot the metrics table last folded in (an Iceberg incremental
append scan, ``start-snapshot-id`` → ``end-snapshot-id``), groups them, and applies the groups
with one ``MERGE INTO``: a new group is inserted; a known one adds its counts, sums and users. The
snapshot folded in rides in that MERGE's own snapshot summary (:data:`SOURCE_SNAPSHOT_KEY`), the
way the ingest's positions ride in its appends, so the rows and the mark move together: a crash
before the commit leaves both as they were, and the next refresh folds the same range again; a
crash after it finds the new mark. Folding the table's committed rows (not the batch the ingest
read) is what makes it exact: the events table is already deduplicated and transformed, so the
metrics equal the full query over the same snapshot, late events included (they land in their
own minute, whenever they arrive).

**Exact unique users.** Distinct counts do not add up, so each row also keeps its users (a sorted
``array<string>``): a MERGE unites the arrays and counts the union. Queries read only the scalar
columns, so the arrays cost storage, not query time.

**When folding cannot be trusted, it rebuilds.** The range must be only appends and compactions
(``replace``: the same rows in new files) on the line from the mark to the current snapshot. A
delete, an overwrite, a rollback or expired history in between (or no mark at all) makes the
refresh rebuild the table from the full query over the current snapshot, in one overwrite that
carries the new mark.

**One refresher at a time.** Two refreshers folding the same range would count it twice. The
ingest takes the metrics table's lease (:mod:`icestream.ingest.lease`) with its own, so a
scheduled ``icestream metrics`` beside it is refused; a MERGE that races a compaction fails
Iceberg's validation and is retried from the mark.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icestream.errors import ConfigError
from icestream.lake.ddl import checked_table_name, create_table_statement
from icestream.lake.inspect import ancestry, load_iceberg_table
from icestream.lake.rowlevel import MODE_PROPERTIES, with_commit_properties
from icestream.lake.statement import Statement
from icestream.lake.summary import METRICS_SOURCE_KEY as SOURCE_SNAPSHOT_KEY
from icestream.lake.summary import METRICS_TABLE_KEY as SOURCE_TABLE_KEY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SOURCE_PROPERTY = "icestream.metrics.source"  # on the metrics table: the events table it follows
METRICS_VIEW = "real_time_metrics"
METRICS_HOLDER = ("metrics refresh", "refreshed")  # how a refusal of the metrics table's lease names its holder
FOLDABLE = frozenset(("append", "replace"))  # what a range may hold for a fold: new rows, or the same rows moved
GROUP_COLUMNS = ("minute", "event_type", "device_type")
METRICS_COLUMNS_DDL = (
    "minute TIMESTAMP NOT NULL COMMENT 'The minute of event time (event_ts truncated)'",
    "event_type STRING COMMENT 'The event type'",
    "device_type STRING COMMENT 'device_info.device_type'",
    "events BIGINT NOT NULL COMMENT 'Events in the group'",
    "unique_users BIGINT NOT NULL COMMENT 'Distinct user_id in the group, exact (the size of users)'",
    "avg_duration_ms DOUBLE COMMENT 'Average properties.duration_ms (null: no event had one)'",
    "duration_sum DOUBLE NOT NULL COMMENT 'Sum of properties.duration_ms, for roll-ups'",
    "duration_count BIGINT NOT NULL COMMENT 'Events with a duration_ms, for roll-ups'",
    "users ARRAY<STRING> COMMENT 'The distinct user_ids, sorted (what a MERGE unites)'",
    "updated_ts TIMESTAMP COMMENT 'When a refresh last changed the row'",
)
# What the metrics rows answer, the same columns as the full query (:func:`full_query`).
ANSWER_COLUMNS = ("minute", "event_type", "device_type", "events", "unique_users", "avg_duration_ms")


def create_metrics_table(
    spark: SparkSession, name: str, events_table: str, properties: Mapping[str, str] | None = None
) -> str:
    """Create the metrics table unless it exists (or check it follows ``events_table``); return its name.

    ``properties`` (a demo's mark) are set in its creating commit.

    Partitioned by day of ``minute`` (a MERGE touches today's rows, and late events' days), with
    merge-on-read row-level writes: a refresh writes the changed groups and a position-delete file,
    and maintenance compacts them away (``icestream maintain``).

    Raises:
        ConfigError: For a bad name, or an existing table that follows another events table.
    """
    name, events_table = checked_table_name(name), checked_table_name(events_table)
    if spark.catalog.tableExists(name):
        followed = load_iceberg_table(spark, name).properties().get(SOURCE_PROPERTY)
        if followed != events_table:
            raise ConfigError(
                f"{name} exists and follows {followed or 'no events table (it is not a metrics table)'}, "
                f"not {events_table}; name another metrics table."
            )
        return name
    comment = f"real_time_metrics of {events_table}: per minute, event type and device, kept by icestream"
    create_table_statement(name, METRICS_COLUMNS_DDL, "days(minute)", comment, properties).run(spark)
    properties = {**dict.fromkeys(MODE_PROPERTIES, "merge-on-read"), SOURCE_PROPERTY: events_table}
    pairs = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())  # constants and a checked name
    Statement(f"ALTER TABLE {name} SET TBLPROPERTIES ({pairs})", writes=True).run(spark)
    return name


def full_query(source: str, where: str = "") -> str:
    """``real_time_metrics`` computed from the events themselves: what the metrics table must equal.

    Args:
        source: What to read (a table name, with a version clause, or ``iceberg_scan(...)`` in DuckDB).
        where: An optional ``WHERE`` clause.
    """
    return f"""
        SELECT date_trunc('minute', event_ts) AS minute,
               event_type,
               device_info.device_type AS device_type,
               count(*) AS events,
               count(DISTINCT user_id) AS unique_users,
               avg(TRY_CAST(properties['duration_ms'] AS DOUBLE)) AS avg_duration_ms
        FROM {source} {where}
        GROUP BY 1, 2, 3
        """


def groups_query(source: str) -> str:
    """The groups of the events in view ``source``, with what a MERGE adds up (counts, sums, users)."""
    return f"""
        SELECT minute, event_type, device_type,
               count(*) AS events,
               array_sort(collect_set(user_id)) AS users,
               coalesce(sum(duration), 0D) AS duration_sum,
               count(duration) AS duration_count
        FROM (SELECT date_trunc('minute', event_ts) AS minute, event_type,
                     device_info.device_type AS device_type, user_id,
                     TRY_CAST(properties['duration_ms'] AS DOUBLE) AS duration
              FROM {source})
        GROUP BY minute, event_type, device_type
        """


def fold_statement(name: str, groups: str) -> Statement:
    """The ``MERGE INTO`` that folds the groups of view ``groups`` into the metrics table ``name``."""
    united = "array_sort(array_union(t.users, s.users))"
    total, count = "t.duration_sum + s.duration_sum", "t.duration_count + s.duration_count"
    return Statement(
        f"""
        MERGE INTO {checked_table_name(name)} t
        USING {groups} s
        ON t.minute = s.minute AND t.event_type <=> s.event_type AND t.device_type <=> s.device_type
        WHEN MATCHED THEN UPDATE SET
            t.events = t.events + s.events,
            t.users = {united},
            t.unique_users = size({united}),
            t.duration_sum = {total},
            t.duration_count = {count},
            t.avg_duration_ms = IF({count} > 0, ({total}) / ({count}), NULL),
            t.updated_ts = current_timestamp()
        WHEN NOT MATCHED THEN INSERT
            (minute, event_type, device_type, events, unique_users, avg_duration_ms, duration_sum,
             duration_count, users, updated_ts)
        VALUES (s.minute, s.event_type, s.device_type, s.events, size(s.users),
                IF(s.duration_count > 0, s.duration_sum / s.duration_count, NULL), s.duration_sum,
                s.duration_count, s.users, current_timestamp())
        """,
        writes=True,
    )


def rebuild_query(groups: str) -> str:
    """The metrics rows of view ``groups`` as a whole (a rebuild writes these, replacing every row)."""
    return f"""
        SELECT minute, event_type, device_type, events, size(users) AS unique_users,
               IF(duration_count > 0, duration_sum / duration_count, NULL) AS avg_duration_ms,
               duration_sum, duration_count, users, current_timestamp() AS updated_ts
        FROM {groups}
        """


@dataclass(frozen=True)
class Mark:
    """What the metrics table has folded in: the events snapshot (None: nothing yet) and its own snapshot."""

    source_snapshot: int | None
    metrics_snapshot: int | None
    holds_rows: bool  # False while the metrics table has no snapshot at all


@dataclass(frozen=True)
class Refresh:
    """What one refresh did.

    ``mode`` is ``"current"`` (nothing new), ``"fold"`` (a MERGE of the new appends) or
    ``"rebuild"`` (with ``reason``); ``events`` counts the events read, ``groups`` the groups
    written; ``snapshot_id`` is the metrics table's new snapshot (None when nothing was committed).
    """

    mode: str
    source_from: int | None
    source_to: int | None
    events: int
    groups: int
    snapshot_id: int | None
    seconds: float
    reason: str = ""

    def describe(self) -> str:
        """One line for a log or a notebook."""
        if self.mode == "current":
            return f"metrics current with events snapshot {self.source_to}"
        how = "folded" if self.mode == "fold" else f"rebuilt ({self.reason})"
        # Nothing folded before (a first build): the range has no start to name.
        span = self.source_to if self.source_from is None else f"{self.source_from} → {self.source_to}"
        return (
            f"metrics {how}: {self.events:,} events into {self.groups:,} groups, events snapshot {span}, "
            f"in {self.seconds:.2f} s"
        )


def read_mark(spark: SparkSession, metrics: str) -> Mark:
    """The events snapshot the metrics table's newest refresh folded in (walking past its compactions)."""
    first = None
    for snapshot in ancestry(spark, metrics):
        first = int(snapshot.snapshotId()) if first is None else first
        value = snapshot.summary().get(SOURCE_SNAPSHOT_KEY)
        if value is not None:
            return Mark(int(value), first, True)
    return Mark(None, first, first is not None)


def range_problem(spark: SparkSession, events: str, start: int, end: int) -> str | None:
    """Why the events snapshots after ``start`` up to ``end`` cannot be folded (None: they can).

    They can when ``start`` is an ancestor of ``end`` and every snapshot between is an append or a
    compaction (:data:`FOLDABLE`).
    """
    for snapshot in _ancestry_from(spark, events, end):
        snapshot_id = int(snapshot.snapshotId())
        if snapshot_id == start:
            return None
        operation = str(snapshot.operation())
        if operation not in FOLDABLE:
            return f"events snapshot {snapshot_id} is a {operation}"
    return f"events snapshot {start} is no longer in the table's history (expired or rolled back)"


def _ancestry_from(spark: SparkSession, events: str, end: int) -> Iterator[Any]:
    """The events table's snapshots from ``end`` back (``end`` is current or was, a moment ago)."""
    walking = False
    for snapshot in ancestry(spark, events):
        walking = walking or int(snapshot.snapshotId()) == end
        if walking:
            yield snapshot


def refresh_metrics(spark: SparkSession, events: str, metrics: str, rebuild: bool = False) -> Refresh:
    """Bring the metrics table up to the events table's current snapshot (see the module docstring).

    Args:
        spark: The session.
        events: The events table.
        metrics: Its metrics table (made by :func:`create_metrics_table`).
        rebuild: Rebuild from the full query even when a fold would do.

    Returns:
        What it did.
    """
    events, metrics = checked_table_name(events), checked_table_name(metrics)
    began = time.monotonic()
    mark = read_mark(spark, metrics)
    current = load_iceberg_table(spark, events).currentSnapshot()
    end = int(current.snapshotId()) if current is not None else None
    if end is None or (end == mark.source_snapshot and not rebuild):
        return Refresh("current", mark.source_snapshot, end, 0, 0, None, time.monotonic() - began)
    reason = "asked" if rebuild else ""
    if not reason and mark.source_snapshot is None:
        reason = "first build" if not mark.holds_rows else "no folded snapshot in the metrics table's history"
    if not reason and mark.source_snapshot is not None:
        reason = range_problem(spark, events, mark.source_snapshot, end) or ""
    reader = spark.read.format("iceberg")
    if reason:
        frame, events_read = reader.option("versionAsOf", end).load(events), _records(current, "total-records")
    else:
        frame = reader.option("start-snapshot-id", mark.source_snapshot).option("end-snapshot-id", end).load(events)
        events_read = sum(_records(snapshot, "added-records") for snapshot in _appends(spark, events, mark, end))
    properties = {SOURCE_SNAPSHOT_KEY: str(end), SOURCE_TABLE_KEY: events}
    groups, snapshot_id = _apply(spark, metrics, frame, properties, fold=not reason, empty=events_read == 0)
    return Refresh(
        "rebuild" if reason else "fold",
        mark.source_snapshot,
        end,
        events_read,
        groups,
        snapshot_id,
        time.monotonic() - began,
        reason,
    )


def _records(snapshot: Any, key: str) -> int:
    """A record count from a snapshot's summary (0 when it has none)."""
    return int(snapshot.summary().get(key) or 0)


def _appends(spark: SparkSession, events: str, mark: Mark, end: int) -> Iterator[Any]:
    """The append snapshots after the mark up to ``end`` (what a fold reads)."""
    for snapshot in _ancestry_from(spark, events, end):
        if int(snapshot.snapshotId()) == mark.source_snapshot:
            return
        if str(snapshot.operation()) == "append":
            yield snapshot


def _apply(
    spark: SparkSession, metrics: str, frame: DataFrame, properties: dict[str, str], fold: bool, empty: bool
) -> tuple[int, int | None]:
    """Fold (MERGE) or rebuild (overwrite) from the events in ``frame``; the commit carries ``properties``.

    The events are grouped inside the ``MERGE`` (or the overwrite) itself: no job of its own.

    Returns:
        The groups written (from the commit's summary) and the metrics table's new snapshot.
    """
    import uuid

    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    options = {f"snapshot-property.{key}": value for key, value in properties.items()}
    view = f"icestream_metrics_{uuid.uuid4().hex[:12]}"  # per call: queries sharing a session never collide
    spark.sql(groups_query("{frame}"), frame=frame).createOrReplaceTempView(view)
    try:
        if fold and empty:  # only compactions since the mark: it moves, in a commit of no rows
            spark.table(metrics).limit(0).writeTo(metrics).options(**options).append()
        elif fold:
            with_commit_properties(spark, properties, lambda: fold_statement(metrics, view).run(spark))
        else:
            spark.sql(rebuild_query(view)).writeTo(metrics).options(**options).overwrite(F.lit(True))
    finally:
        spark.catalog.dropTempView(view)
    for snapshot in ancestry(spark, metrics):  # ours, or a commit made after it: find ours by its mark
        if snapshot.summary().get(SOURCE_SNAPSHOT_KEY) == properties[SOURCE_SNAPSHOT_KEY]:
            return _records(snapshot, "added-records"), int(snapshot.snapshotId())
    return 0, None


def create_metrics_view(spark: SparkSession, metrics: str, view: str) -> str | None:
    """Create (or replace) an Iceberg view ``view`` over the metrics table's answer columns.

    Returns:
        The view's name, or None when the catalog keeps no views (Spark's ``MISSING_CATALOG_ABILITY``:
        Iceberg's Hadoop catalog, and its Glue catalog as of 1.10, apache/iceberg#12488). The JDBC
        catalog keeps them.
    """
    metrics, view = checked_table_name(metrics), checked_table_name(view)
    columns = ", ".join(ANSWER_COLUMNS)
    statement = Statement(f"CREATE OR REPLACE VIEW {view} AS SELECT {columns} FROM {metrics}", writes=True)
    try:
        statement.run(spark)
    except Exception as error:  # the catalog's own refusal, whatever its class
        if "view" in str(error).lower() and ("support" in str(error).lower() or "catalog" in str(error).lower()):
            return None
        raise
    return view
