"""Questions asked of the events table: real-time metrics, pruning, and time travel (Spark SQL).

Every query is Spark 3.5 SQL against Iceberg 1.10 and uses the metadata tables' real columns
(``snapshots.committed_at``, ``history.made_current_at``, ``files.record_count`` ...).

**What "now" means.** Windows ("the last 15 minutes") end at ``now``, which defaults to the table's
newest ``event_ts``, not the wall clock: the backfill spreads event time over the hours before the
run and the ingest stops when the stream is drained, so a wall-clock window would be empty (or
shrink) a few minutes later. Anchoring at the newest event makes a result reproducible for a table
that stopped growing; pass ``now=datetime.now(UTC)`` for a live dashboard.

**Pruning.** Window bounds go into SQL as bound parameters wrapped in ``timestamp_micros(...)``,
which Spark folds into a literal before planning, so Iceberg receives ``event_ts > <literal>``,
maps it onto the hidden ``hours(event_ts)`` partition, and skips the other hours' files. A bound
computed by a subquery (``max(event_ts) - INTERVAL ...``) would not be pushed down: every file
would be read. :func:`scan_metrics` reads the scan's own counters to show it.

Names reach SQL only through :func:`icestream.tables.qualified_name`; snapshot ids are checked to
be integers; every other value is a bound parameter.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from icestream.config import Settings, validate_identifier
from icestream.errors import ConfigError
from icestream.tables import create_events_table, qualified_name
from icestream.timestamps import as_utc, from_micros, to_micros

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

# Counters of Iceberg's BatchScan node (SparkScan.supportedCustomMetrics in Iceberg 1.10).
SCAN_METRICS = (
    "resultDataFiles",
    "skippedDataFiles",
    "scannedDataManifests",
    "skippedDataManifests",
    "totalDataManifest",
    "totalDataFileSize",
    "numOutputRows",
)


# -- helpers ----------------------------------------------------------------------------------
def table_name(name: str) -> str:
    """Validate a dotted table name (``catalog.namespace.table``) part by part.

    Args:
        name: The table name.

    Returns:
        The same name, every part checked by :func:`icestream.config.validate_identifier`.
    """
    return qualified_name(*name.split("."))


def snapshot_id_literal(snapshot_id: Any) -> int:
    """Check that a snapshot id is an integer (it is written into SQL, which cannot bind it).

    Raises:
        ConfigError: If ``snapshot_id`` is not an integer.
    """
    if isinstance(snapshot_id, bool) or not isinstance(snapshot_id, int):
        try:
            return int(str(snapshot_id), 10)
        except ValueError:
            raise ConfigError(f"snapshot id {snapshot_id!r} is not an integer.") from None
    return snapshot_id


def newest_event_ts(spark: SparkSession, table: str) -> datetime | None:
    """The table's newest ``event_ts`` (UTC), or None when it is empty."""
    row = spark.sql(f"SELECT unix_micros(max(event_ts)) AS newest FROM {table_name(table)}").first()
    return None if row.newest is None else from_micros(row.newest)


def resolve_now(spark: SparkSession, table: str, now: datetime | None = None) -> datetime:
    """The end of a window: ``now`` if given, else the newest event (see the module docstring).

    Raises:
        ConfigError: If ``now`` is not given and the table is empty.
    """
    if now is not None:
        return as_utc(now)
    newest = newest_event_ts(spark, table)
    if newest is None:
        raise ConfigError(f"{table} has no events yet: run the ingest (02_stream_ingest) first, or pass now=.")
    return newest


@dataclass(frozen=True)
class Window:
    """A time window ``(start, end]`` of event time, both aware UTC datetimes."""

    start: datetime
    end: datetime

    @property
    def args(self) -> dict[str, int]:
        """Bound parameters ``start``/``end`` in epoch microseconds."""
        return {"start": to_micros(self.start), "end": to_micros(self.end)}


WINDOW_SQL = "event_ts > timestamp_micros(:start) AND event_ts <= timestamp_micros(:end)"


def window(spark: SparkSession, table: str, minutes: float, now: datetime | None = None) -> Window:
    """The window of the last ``minutes`` before ``now`` (default: the newest event).

    Raises:
        ConfigError: If ``minutes`` is not positive.
    """
    if not minutes > 0:
        raise ConfigError(f"window minutes: {minutes} must be positive.")
    end = resolve_now(spark, table, now)
    return Window(end - timedelta(minutes=minutes), end)


# -- real-time questions ----------------------------------------------------------------------
def events_by_type(spark: SparkSession, table: str, minutes: float, now: datetime | None = None) -> pd.DataFrame:
    """Events of the last ``minutes`` by type: count, unique users, average duration.

    ``duration_ms`` is a string property (only page views have it); ``try_cast`` turns a bad value
    into null instead of failing the query.

    Returns:
        Columns ``event_type``, ``events``, ``unique_users``, ``avg_duration_ms``, most events first.
    """
    span = window(spark, table, minutes, now)
    return spark.sql(
        f"""
        SELECT event_type,
               count(*) AS events,
               count(DISTINCT user_id) AS unique_users,
               avg(try_cast(properties['duration_ms'] AS DOUBLE)) AS avg_duration_ms
        FROM {table_name(table)}
        WHERE {WINDOW_SQL}
        GROUP BY event_type
        ORDER BY events DESC, event_type
        """,
        args=span.args,
    ).toPandas()


def active_sessions(
    spark: SparkSession,
    table: str,
    minutes: float,
    now: datetime | None = None,
    lookback_minutes: float = 60.0,
) -> pd.DataFrame:
    """Sessions with an event in the last ``minutes``, with their length so far.

    A session's length is ``max(event_ts) - min(event_ts)`` over its events in the
    ``lookback_minutes`` before ``now``, so a session that started before the window counts
    from its real start, and the query still reads only the last hours' files.

    Returns:
        Columns ``session_id``, ``user_id``, ``events``, ``first_event``, ``last_event``,
        ``length_s``; longest first.
    """
    span = window(spark, table, minutes, now)
    lookback = Window(span.end - timedelta(minutes=max(lookback_minutes, minutes)), span.end)
    return spark.sql(
        f"""
        SELECT session_id,
               first(user_id) AS user_id,
               count(*) AS events,
               min(event_ts) AS first_event,
               max(event_ts) AS last_event,
               (unix_micros(max(event_ts)) - unix_micros(min(event_ts))) / 1e6 AS length_s
        FROM {table_name(table)}
        WHERE {WINDOW_SQL} AND session_id IS NOT NULL
        GROUP BY session_id
        HAVING max(event_ts) > timestamp_micros(:window_start)
        ORDER BY length_s DESC, session_id
        """,
        args={**lookback.args, "window_start": to_micros(span.start)},
    ).toPandas()


@dataclass(frozen=True)
class Dashboard:
    """The KPI dashboard, the same shape from every engine.

    Attributes:
        totals: One row: ``events``, ``unique_users``, ``unique_sessions``, ``oldest_event``,
            ``newest_event`` (UTC), ``avg_ingest_latency_s`` (ingest_ts - Kinesis arrival).
        by_type: ``event_type``, ``events``, most first.
        by_device: ``device_type``, ``events``, ``share`` (of all events), most first.
    """

    totals: pd.DataFrame
    by_type: pd.DataFrame
    by_device: pd.DataFrame


DASHBOARD_COUNTS_COLUMNS = ("event_type", "device_type", "events")


def dashboard_from_parts(totals: pd.DataFrame, counts: pd.DataFrame) -> Dashboard:
    """Assemble a :class:`Dashboard` from an engine's two result sets.

    Args:
        totals: One row with ``events``, ``unique_users``, ``unique_sessions``, ``oldest_us``,
            ``newest_us`` (epoch microseconds) and ``avg_ingest_latency_s``.
        counts: Events by ``event_type`` and ``device_type``: one scan serves both splits.

    Returns:
        The dashboard; null types or devices show as ``(none)``.
    """
    import pandas as pd

    row = totals.iloc[0]
    shown = pd.DataFrame(
        {
            "events": [int(row["events"])],
            "unique_users": [int(row["unique_users"])],
            "unique_sessions": [int(row["unique_sessions"])],
            "oldest_event": [None if pd.isna(row["oldest_us"]) else from_micros(row["oldest_us"])],
            "newest_event": [None if pd.isna(row["newest_us"]) else from_micros(row["newest_us"])],
            "avg_ingest_latency_s": [
                None if pd.isna(row["avg_ingest_latency_s"]) else float(row["avg_ingest_latency_s"])
            ],
        }
    )
    counts = counts.astype({"events": "int64"}).fillna({"event_type": "(none)", "device_type": "(none)"})

    def split(column: str) -> pd.DataFrame:
        frame = counts.groupby(column, as_index=False)["events"].sum()
        return frame.sort_values(["events", column], ascending=[False, True], ignore_index=True)

    by_device = split("device_type")
    total = by_device["events"].sum()
    by_device["share"] = by_device["events"] / total if total else 0.0
    return Dashboard(shown, split("event_type"), by_device)


def kpi_dashboard(
    spark: SparkSession,
    table: str,
    minutes: float | None = None,
    now: datetime | None = None,
    snapshot_id: int | None = None,
) -> Dashboard:
    """The KPI dashboard over the last ``minutes`` (None: the whole table).

    Args:
        spark: The session.
        table: The events table.
        minutes: Window length; None reads every event.
        now: Window end (default: the newest event).
        snapshot_id: Read this snapshot (so another engine can be compared on the same one).

    Returns:
        The dashboard.
    """
    source = table_name(table)
    if snapshot_id is not None:
        source += f" VERSION AS OF {snapshot_id_literal(snapshot_id)}"
    where, args = "", {}
    if minutes is not None:
        span = window(spark, table, minutes, now)
        where, args = f"WHERE {WINDOW_SQL}", span.args
    totals = spark.sql(
        f"""
        SELECT count(*) AS events,
               count(DISTINCT user_id) AS unique_users,
               count(DISTINCT session_id) AS unique_sessions,
               unix_micros(min(event_ts)) AS oldest_us,
               unix_micros(max(event_ts)) AS newest_us,
               avg(unix_micros(ingest_ts) - unix_micros(arrival_ts)) / 1e6 AS avg_ingest_latency_s
        FROM {source} {where}
        """,
        args=args,
    ).toPandas()
    counts = spark.sql(
        f"""
        SELECT event_type, device_info.device_type AS device_type, count(*) AS events
        FROM {source} {where}
        GROUP BY event_type, device_info.device_type
        """,
        args=args,
    ).toPandas()
    return dashboard_from_parts(totals, counts)


def minute_metrics_view(
    spark: SparkSession,
    table: str,
    minutes: float,
    now: datetime | None = None,
    view: str = "events_per_minute",
) -> str:
    """Create (or replace) a temporary view of per-minute metrics over the last ``minutes``.

    The window is part of the view (built with Column expressions): a filter on the view's
    ``minute`` column would reach Iceberg as ``date_trunc(...)``, which it cannot prune on.

    Args:
        spark: The session.
        table: The events table.
        minutes: Window length.
        now: Window end (default: the newest event).
        view: Name of the temporary view.

    Returns:
        The view name. Columns: ``minute``, ``event_type``, ``events``, ``unique_users``,
        ``avg_duration_ms``.
    """
    from pyspark.sql import functions as F  # noqa: N812 - the usual alias

    span = window(spark, table, minutes, now)
    frame = (
        spark.table(table_name(table))
        .where(
            (F.col("event_ts") > F.timestamp_micros(F.lit(to_micros(span.start))))
            & (F.col("event_ts") <= F.timestamp_micros(F.lit(to_micros(span.end))))
        )
        .groupBy(F.date_trunc("minute", "event_ts").alias("minute"), "event_type")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.countDistinct("user_id").alias("unique_users"),
            F.avg(F.expr("try_cast(properties['duration_ms'] AS DOUBLE)")).alias("avg_duration_ms"),
        )
    )
    frame.createOrReplaceTempView(validate_identifier(view, "view"))
    return view


# -- pruning ----------------------------------------------------------------------------------
def _scala_map(metrics: Any) -> dict[str, Any]:
    out, items = {}, metrics.iterator()
    while items.hasNext():
        pair = items.next()
        out[pair._1()] = pair._2()
    return out


def _plan_nodes(plan: Any) -> list[Any]:
    """Every node of an executed physical plan, looking inside adaptive plans and query stages."""
    nodes, pending = [], [plan]
    while pending:
        node = pending.pop()
        name = node.nodeName()
        if name == "AdaptiveSparkPlan":
            pending.append(node.executedPlan())
            continue
        if "QueryStage" in name:  # ShuffleQueryStage, BroadcastQueryStage, TableCacheQueryStage
            pending.append(node.plan())
            continue
        nodes.append(node)
        children = node.children()
        pending.extend(children.apply(index) for index in range(children.size()))
    return nodes


def scan_metrics(frame: DataFrame) -> dict[str, int]:
    """Run ``frame`` and return the Iceberg scan counters of its plan (summed over its scans).

    Reads the metrics of the executed plan's ``BatchScan`` nodes (the numbers the Spark UI shows):
    ``resultDataFiles`` are the files the scan opens, ``skippedDataFiles`` those pruned inside the
    manifests it read; ``skippedDataManifests`` are whole manifests pruned by partition ranges.

    Args:
        frame: A query over Iceberg tables.

    Returns:
        Counter name → value, for the names in :data:`SCAN_METRICS` (0 when absent).
    """
    frame.collect()  # the same QueryExecution the metrics are read from
    totals = dict.fromkeys(SCAN_METRICS, 0)
    for node in _plan_nodes(frame._jdf.queryExecution().executedPlan()):
        if node.nodeName().startswith("BatchScan"):
            for name, metric in _scala_map(node.metrics()).items():
                if name in totals:
                    totals[name] += int(metric.value())
    return totals


def pruning_report(spark: SparkSession, table: str, minutes: float, now: datetime | None = None) -> pd.DataFrame:
    """How many data files a windowed query opens, against how many the table has.

    Args:
        spark: The session.
        table: The events table.
        minutes: Window length.
        now: Window end (default: the newest event).

    Returns:
        One row: ``window_minutes``, ``data_files_in_table``, ``data_files_scanned``,
        ``data_files_skipped`` (table files not scanned), ``manifests_scanned``, ``manifests_total``,
        ``rows_read``, ``rows_in_window``.
    """
    import pandas as pd

    name = table_name(table)
    span = window(spark, table, minutes, now)
    # Grouped, so Iceberg cannot answer it from file statistics alone (aggregate push-down).
    query = spark.sql(
        f"SELECT event_type, count(*) AS events FROM {name} WHERE {WINDOW_SQL} GROUP BY event_type", args=span.args
    )
    metrics = scan_metrics(query)
    files = spark.sql(f"SELECT count(*) AS files FROM {name}.data_files").first().files
    return pd.DataFrame(
        [
            {
                "window_minutes": minutes,
                "data_files_in_table": files,
                "data_files_scanned": metrics["resultDataFiles"],
                "data_files_skipped": files - metrics["resultDataFiles"],
                "manifests_scanned": metrics["scannedDataManifests"],
                "manifests_total": metrics["totalDataManifest"],
                "rows_read": metrics["numOutputRows"],
                "rows_in_window": sum(row.events for row in query.collect()),
            }
        ]
    )


# -- time travel --------------------------------------------------------------------------------
Version = int | str | datetime  # a snapshot id, a tag or branch name, or a point in time


def _namespace_table(table: str) -> tuple[str, str]:
    """``(catalog, 'namespace.table')``: procedures take the table as a string in their catalog."""
    catalog, *rest = table_name(table).split(".")
    return catalog, ".".join(rest)


def as_of(table: str, version: Version | None) -> str:
    """``<table>`` with a ``VERSION AS OF`` or ``TIMESTAMP AS OF`` clause.

    Spark cannot bind parameters in these clauses, so each kind of value is checked instead:
    an id must be an integer, a ref name an identifier, a time a datetime (written as epoch
    microseconds).

    Args:
        table: The table.
        version: Snapshot id, tag or branch name, a datetime, or None for the current state.

    Returns:
        SQL text for a ``FROM`` clause.
    """
    name = table_name(table)
    if version is None:
        return name
    if isinstance(version, datetime):
        return f"{name} TIMESTAMP AS OF timestamp_micros({to_micros(version)})"
    if isinstance(version, str) and not version.lstrip("-").isdigit():
        return f"{name} VERSION AS OF '{validate_identifier(version, 'tag or branch')}'"
    return f"{name} VERSION AS OF {snapshot_id_literal(version)}"


def snapshots(spark: SparkSession, table: str) -> pd.DataFrame:
    """The table's snapshots, oldest first, with the summary fields worth reading.

    Returns:
        ``committed_at``, ``snapshot_id``, ``parent_id``, ``operation``, ``added_records``,
        ``total_records``, ``added_files``, ``total_files`` and ``batch_id`` (the ingest's
        ``icestream.batch-id``, null for other writers).
    """
    return spark.sql(
        f"""
        SELECT committed_at, snapshot_id, parent_id, operation,
               CAST(summary['added-records'] AS BIGINT) AS added_records,
               CAST(summary['total-records'] AS BIGINT) AS total_records,
               CAST(summary['added-data-files'] AS INT) AS added_files,
               CAST(summary['total-data-files'] AS INT) AS total_files,
               summary['icestream.batch-id'] AS batch_id
        FROM {table_name(table)}.snapshots
        ORDER BY committed_at, snapshot_id
        """
    ).toPandas()


def history(spark: SparkSession, table: str) -> pd.DataFrame:
    """The table's history: which snapshot was current when (a rollback adds a row).

    Returns:
        ``made_current_at``, ``snapshot_id``, ``parent_id``, ``is_current_ancestor``.
    """
    return spark.sql(
        f"SELECT made_current_at, snapshot_id, parent_id, is_current_ancestor "
        f"FROM {table_name(table)}.history ORDER BY made_current_at"
    ).toPandas()


def refs(spark: SparkSession, table: str) -> pd.DataFrame:
    """The table's branches and tags (``name``, ``type``, ``snapshot_id``)."""
    return spark.sql(f"SELECT name, type, snapshot_id FROM {table_name(table)}.refs ORDER BY type, name").toPandas()


def current_snapshot_id(spark: SparkSession, table: str, branch: str = "main") -> int | None:
    """The snapshot a branch points at (``main``: the table's current snapshot), None if absent."""
    row = spark.sql(
        f"SELECT snapshot_id FROM {table_name(table)}.refs WHERE name = :branch", args={"branch": branch}
    ).first()
    return None if row is None else int(row.snapshot_id)


def total_records(spark: SparkSession, table: str, snapshot_id: int) -> int:
    """Rows in the table as of a snapshot, from its summary (no data read)."""
    row = spark.sql(
        f"SELECT CAST(summary['total-records'] AS BIGINT) AS records FROM {table_name(table)}.snapshots "
        "WHERE snapshot_id = :id",
        args={"id": snapshot_id_literal(snapshot_id)},
    ).first()
    if row is None:
        raise ConfigError(f"{table} has no snapshot {snapshot_id} (expired, or from another table).")
    return int(row.records)


def counts_by_type(spark: SparkSession, table: str, version: Version | None = None) -> pd.DataFrame:
    """Events by type in the table as it was at ``version`` (see :func:`as_of`).

    Returns:
        ``event_type``, ``events``.
    """
    return spark.sql(
        f"SELECT event_type, count(*) AS events FROM {as_of(table, version)} GROUP BY event_type ORDER BY event_type"
    ).toPandas()


def compare_counts_by_type(spark: SparkSession, table: str, before: Version, after: Version) -> pd.DataFrame:
    """Events by type at two points, side by side.

    Returns:
        ``event_type``, ``before``, ``after``, ``change`` (types absent at a point count 0).
    """
    earlier = counts_by_type(spark, table, before).set_index("event_type")["events"].rename("before")
    later = counts_by_type(spark, table, after).set_index("event_type")["events"].rename("after")
    frame = earlier.to_frame().join(later, how="outer").fillna(0).astype("int64")
    frame["change"] = frame["after"] - frame["before"]
    return frame.reset_index().sort_values("event_type", ignore_index=True)


def appended_between(spark: SparkSession, table: str, start_snapshot_id: int, end_snapshot_id: int) -> DataFrame:
    """Rows appended after ``start_snapshot_id`` up to and including ``end_snapshot_id``.

    An incremental read: Iceberg plans only the files those snapshots added, no full scan. It reads
    ``append`` snapshots and skips ``replace`` ones (compaction moves rows, it adds none).

    Returns:
        A Spark DataFrame of the appended rows.
    """
    return (
        spark.read.format("iceberg")
        .option("start-snapshot-id", str(snapshot_id_literal(start_snapshot_id)))
        .option("end-snapshot-id", str(snapshot_id_literal(end_snapshot_id)))
        .load(table_name(table))
    )


def data_files(spark: SparkSession, table: str) -> pd.DataFrame:
    """The current data files (``file_path``, ``partition``, ``record_count``, ``file_size_in_bytes``)."""
    return spark.sql(
        f"SELECT file_path, CAST(partition AS STRING) AS partition, record_count, file_size_in_bytes "
        f"FROM {table_name(table)}.data_files ORDER BY file_path"
    ).toPandas()


def columns_at(spark: SparkSession, table: str, version: Version | None = None) -> list[str]:
    """The columns a read at ``version`` returns: a snapshot is read with the schema it was written with."""
    return spark.sql(f"SELECT * FROM {as_of(table, version)} LIMIT 0").columns


# -- writing to a copy: tags, branches, write-audit-publish, rollback, schema evolution ---------
def create_tag(spark: SparkSession, table: str, tag: str, snapshot_id: int) -> None:
    """Name a snapshot (``CREATE OR REPLACE TAG``): the name outlives snapshot expiry."""
    spark.sql(
        f"ALTER TABLE {table_name(table)} CREATE OR REPLACE TAG {validate_identifier(tag, 'tag')} "
        f"AS OF VERSION {snapshot_id_literal(snapshot_id)}"
    )


def create_branch(spark: SparkSession, table: str, branch: str, snapshot_id: int | None = None) -> None:
    """Create (or reset) a branch at ``snapshot_id`` (default: the current snapshot)."""
    at = "" if snapshot_id is None else f" AS OF VERSION {snapshot_id_literal(snapshot_id)}"
    spark.sql(f"ALTER TABLE {table_name(table)} CREATE OR REPLACE BRANCH {validate_identifier(branch, 'branch')}{at}")


def drop_ref(spark: SparkSession, table: str, name: str, kind: str) -> None:
    """Drop a tag or branch if it exists (``kind``: ``TAG`` or ``BRANCH``).

    Raises:
        ConfigError: If ``kind`` is neither.
    """
    if kind.upper() not in ("TAG", "BRANCH"):
        raise ConfigError(f"ref kind {kind!r}: choose TAG or BRANCH.")
    spark.sql(f"ALTER TABLE {table_name(table)} DROP {kind.upper()} IF EXISTS {validate_identifier(name, kind)}")


def branch_table(table: str, branch: str) -> str:
    """The name that reads or writes a branch: ``<table>.branch_<branch>``."""
    return f"{table_name(table)}.branch_{validate_identifier(branch, 'branch')}"


def audit_append(spark: SparkSession, table: str, base_snapshot_id: int, head: int | str) -> pd.DataFrame:
    """Checks a write must pass before it is published (the "audit" of write-audit-publish).

    Audits only what the write added: the rows appended after ``base_snapshot_id`` up to ``head``
    (a snapshot id, or a branch name for its newest snapshot), read incrementally.

    Args:
        spark: The session.
        table: The table.
        base_snapshot_id: The snapshot the write started from (e.g. ``main`` when the branch was made).
        head: Where the write ended: a snapshot id or a branch name.

    Returns:
        One row: ``rows`` added, ``missing_event_id``, ``missing_event_ts``, ``duplicate_event_ids``
        (ids repeated within the write), ``ids_already_in_table`` (ids the base snapshot has) and
        ``passed`` (rows were added and every count is zero).
    """
    from pyspark.sql import functions as F  # noqa: N812

    head_id = current_snapshot_id(spark, table, head) if isinstance(head, str) else snapshot_id_literal(head)
    if head_id is None:
        raise ConfigError(f"{table} has no branch {head!r}.")
    added = appended_between(spark, table, base_snapshot_id, head_id) if head_id != base_snapshot_id else None
    if added is None:
        checks = {name: 0 for name in ("rows", "missing_event_id", "missing_event_ts", "duplicate_event_ids")}
        checks["ids_already_in_table"] = 0
    else:
        row = added.agg(
            F.count(F.lit(1)).alias("rows"),
            F.count_if(F.col("event_id").isNull()).alias("missing_event_id"),
            F.count_if(F.col("event_ts").isNull()).alias("missing_event_ts"),
            (F.count(F.lit(1)) - F.countDistinct("event_id") - F.count_if(F.col("event_id").isNull())).alias(
                "duplicate_event_ids"
            ),
        ).first()
        checks = row.asDict()
        base_ids = spark.read.option("snapshot-id", str(snapshot_id_literal(base_snapshot_id))).table(table_name(table))
        checks["ids_already_in_table"] = (
            added.select("event_id").distinct().join(base_ids.select("event_id").distinct(), "event_id").count()
        )
    import pandas as pd

    frame = pd.DataFrame([checks])
    problems = frame[["missing_event_id", "missing_event_ts", "duplicate_event_ids", "ids_already_in_table"]]
    frame["passed"] = (problems.sum(axis=1) == 0) & (frame["rows"] > 0)
    return frame


def fast_forward(spark: SparkSession, table: str, branch: str, to: str) -> pd.DataFrame:
    """Publish: move ``branch`` (usually ``main``) forward to the head of ``to``.

    Returns:
        The procedure's result (``branch_updated``, ``previous_ref``, ``updated_ref``).
    """
    catalog, name = _namespace_table(table)
    return spark.sql(
        f"CALL {catalog}.system.fast_forward(table => '{name}', "
        f"branch => '{validate_identifier(branch, 'branch')}', to => '{validate_identifier(to, 'branch')}')"
    ).toPandas()


def rollback_to_snapshot(spark: SparkSession, table: str, snapshot_id: int) -> pd.DataFrame:
    """Make an earlier snapshot current again; later snapshots stay in the metadata.

    Returns:
        The procedure's result (``previous_snapshot_id``, ``current_snapshot_id``).
    """
    catalog, name = _namespace_table(table)
    return spark.sql(
        f"CALL {catalog}.system.rollback_to_snapshot(table => '{name}', "
        f"snapshot_id => {snapshot_id_literal(snapshot_id)})"
    ).toPandas()


ADDABLE_TYPES = ("STRING", "INT", "BIGINT", "DOUBLE", "BOOLEAN", "TIMESTAMP")


def add_column(spark: SparkSession, table: str, column: str, data_type: str = "STRING") -> None:
    """Add an optional column: a metadata-only change, no data file is rewritten.

    Raises:
        ConfigError: If ``data_type`` is not one of :data:`ADDABLE_TYPES`.
    """
    if data_type.upper() not in ADDABLE_TYPES:
        raise ConfigError(f"column type {data_type!r}: choose one of {', '.join(ADDABLE_TYPES)}.")
    name = table_name(table)
    column = validate_identifier(column, "column")
    if column in spark.table(name).columns:
        return  # re-runs: the column is already there
    spark.sql(f"ALTER TABLE {name} ADD COLUMN {column} {data_type.upper()}")


def recreate_events_copy(spark: SparkSession, settings: Settings, suffix: str = "time_travel") -> str:
    """Drop and create an empty table with the events table's DDL, named ``<table>_<suffix>``.

    Writes that change history (tags, branches, rollback, schema changes) are shown on such a copy:
    the ingest keeps its Kinesis positions in the events table's snapshot summaries, so rolling that
    table back would make it read again what the rollback removed.

    Returns:
        The copy's qualified name.
    """
    copy = dataclasses.replace(settings, table=validate_identifier(f"{settings.table}_{suffix}", "table"))
    name = qualified_name(copy.catalog, copy.namespace, copy.table)
    spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
    return create_events_table(spark, copy)


def event_time_slices(spark: SparkSession, table: str, parts: int) -> list[Window]:
    """Split the table's event-time range into ``parts`` equal windows, oldest first.

    Raises:
        ConfigError: If ``parts`` < 1 or the table is empty.
    """
    if parts < 1:
        raise ConfigError(f"parts: {parts} must be at least 1.")
    row = spark.sql(
        f"SELECT unix_micros(min(event_ts)) AS oldest, unix_micros(max(event_ts)) AS newest FROM {table_name(table)}"
    ).first()
    if row.oldest is None:
        raise ConfigError(f"{table} has no events to copy: run the ingest (02_stream_ingest) first.")
    start, step = row.oldest - 1, (row.newest - row.oldest + 1) / parts
    edges = [start + round(step * index) for index in range(parts)] + [row.newest]
    return [Window(from_micros(a), from_micros(b)) for a, b in itertools.pairwise(edges)]


def append_window(spark: SparkSession, source: str, target: str, span: Window, branch: str | None = None) -> int:
    """Append the source's events in ``span`` to ``target`` (or its ``branch``); one snapshot.

    A target column the source lacks is filled from ``properties[<column>]`` cast to its type,
    the rule the ingest follows for a field that starts arriving after the table was created.

    Returns:
        The rows appended.
    """
    from pyspark.sql import functions as F  # noqa: N812

    target_name = table_name(target)
    rows = spark.table(table_name(source)).where(
        (F.col("event_ts") > F.timestamp_micros(F.lit(to_micros(span.start))))
        & (F.col("event_ts") <= F.timestamp_micros(F.lit(to_micros(span.end))))
    )
    columns = [
        F.col(field.name)
        if field.name in rows.columns
        else F.col("properties").getItem(field.name).cast(field.dataType).alias(field.name)
        for field in spark.table(target_name).schema.fields
    ]
    rows = rows.select(*columns)
    count = rows.count()
    rows.writeTo(branch_table(target, branch) if branch else target_name).append()
    return count
