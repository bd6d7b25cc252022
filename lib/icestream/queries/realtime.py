"""Real-time questions asked of the events table, and how many files they read (Spark SQL).

Every function takes a :class:`~icestream.lake.LakeTable`, whose name was checked once; each SQL
statement runs through it, so ``table.last_statement`` shows the query behind an answer.

**What "now" means.** Windows ("the last 15 minutes") end at ``now``, which defaults to the table's
newest trusted ``event_ts``, not the wall clock: the backfill spreads event time over the hours
before the run and the ingest stops when the stream is drained, so a wall-clock window would be
empty (or shrink) a few minutes later. Anchoring at the newest event makes a result reproducible
for a table that stopped growing; pass ``now=datetime.now(UTC)`` for a live dashboard. Trusted: an
event time more than five minutes after the event's own arrival (a producer's bad clock, a bogus
``9999-12-31``) is kept and counted in any window that holds it, but cannot set "now"
(:mod:`icestream.lake.window`; :func:`ahead_of_arrival` lists such events).

**Runs.** A lake that has seen several runs of the workbook holds each run's history and live
events, over overlapping hours; :func:`icestream.demos.this_run` says which are this run's.
Every question takes ``run_ids``: only those runs' events are counted (bound values, never text).

**Pruning.** Window bounds go into SQL as bound parameters wrapped in ``timestamp_micros(...)``,
which Spark folds into a literal before planning, so Iceberg receives ``event_ts > <literal>``,
maps it onto the hidden ``hours(event_ts)`` partition, and skips the other hours' files. A bound
computed by a subquery (``max(event_ts) - INTERVAL ...``) would not be pushed down: every file
would be read. :func:`scan_metrics` reads the scan's own counters to show it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from icestream.errors import ConfigError
from icestream.lake.statement import Statement
from icestream.lake.window import TRUSTED_EVENT_SQL, WINDOW_SQL, Window
from icestream.queries.runs import run_filter
from icestream.runtime.handles import first_row
from icestream.timestamps import as_utc, from_micros, to_micros

__all__ = [
    "Dashboard",
    "active_sessions",
    "ahead_of_arrival",
    "dashboard_from_parts",
    "dashboard_sql",
    "events_by_type",
    "events_per_minute",
    "kpi_dashboard",
    "late_events",
    "pruning_report",
    "resolve_now",
    "run_filter",
    "scan_metrics",
    "window",
]

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame

    from icestream.lake.table import LakeTable

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


# -- windows ------------------------------------------------------------------------------------
def resolve_now(table: LakeTable, now: datetime | None = None, run_ids: Sequence[str] | None = None) -> datetime:
    """The end of a window: ``now`` if given, else the newest trusted event (of ``run_ids``; module docstring).

    Raises:
        ConfigError: If ``now`` is not given and the table (or the runs) has no event.
    """
    if now is not None:
        return as_utc(now)
    runs, args = run_filter(run_ids)
    sql = f"SELECT unix_micros(max(event_ts)) AS newest FROM {table.name} WHERE {TRUSTED_EVENT_SQL}{runs}"
    row = first_row(table.run(Statement(sql, args)))
    if row.newest is None:
        raise ConfigError(f"{table.name} has no events yet: run the ingest (02_stream_ingest) first, or pass now=.")
    return from_micros(row.newest)


def ahead_of_arrival(table: LakeTable, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The events whose time runs more than ``ARRIVAL_TOLERANCE`` ahead of their arrival (they cannot set "now").

    Returns:
        ``event_id``, ``event_type``, ``event_ts``, ``arrival_ts`` (aware UTC datetimes, as objects:
        a year-9999 time is beyond pandas' nanosecond timestamps) and ``ahead_s`` (event time minus
        arrival, in seconds), furthest ahead first.
    """
    import pandas as pd

    runs, args = run_filter(run_ids)
    statement = Statement(
        f"""
        SELECT event_id, event_type, unix_micros(event_ts) AS event_us,
               unix_micros(coalesce(arrival_ts, ingest_ts)) AS arrival_us
        FROM {table.name}
        WHERE NOT ({TRUSTED_EVENT_SQL}){runs}
        ORDER BY event_us - arrival_us DESC, event_id
        """,
        args,
    )
    rows = table.run(statement).collect()
    return pd.DataFrame(
        {
            "event_id": [row.event_id for row in rows],
            "event_type": [row.event_type for row in rows],
            "event_ts": pd.Series([from_micros(row.event_us) for row in rows], dtype=object),
            "arrival_ts": pd.Series([from_micros(row.arrival_us) for row in rows], dtype=object),
            "ahead_s": [(row.event_us - row.arrival_us) / 1e6 for row in rows],
        }
    )


def window(
    table: LakeTable, minutes: float, now: datetime | None = None, run_ids: Sequence[str] | None = None
) -> Window:
    """The window of the last ``minutes`` before ``now`` (default: :func:`resolve_now`).

    Raises:
        ConfigError: If ``minutes`` is not positive.
    """
    if not minutes > 0:
        raise ConfigError(f"window minutes: {minutes} must be positive.")
    end = resolve_now(table, now, run_ids)
    return Window(end - timedelta(minutes=minutes), end)


# -- real-time questions ----------------------------------------------------------------------
def events_by_type(
    table: LakeTable, minutes: float, now: datetime | None = None, run_ids: Sequence[str] | None = None
) -> pd.DataFrame:
    """Events of the last ``minutes`` by type: count, unique users, average duration.

    ``duration_ms`` is a string property (only page views have it); ``try_cast`` turns a bad value
    into null instead of failing the query.

    Returns:
        Columns ``event_type``, ``events``, ``unique_users``, ``avg_duration_ms`` (None for types
        with no duration), most events first.
    """
    span = window(table, minutes, now, run_ids)
    runs, run_args = run_filter(run_ids)
    statement = Statement(
        f"""
        SELECT event_type,
               count(*) AS events,
               count(DISTINCT user_id) AS unique_users,
               avg(try_cast(properties['duration_ms'] AS DOUBLE)) AS avg_duration_ms
        FROM {table.name}
        WHERE {WINDOW_SQL}{runs}
        GROUP BY event_type
        ORDER BY events DESC, event_type
        """,
        {**span.args, **run_args},
    )
    return nulls_as_none(table.run(statement).toPandas(), "avg_duration_ms")


def nulls_as_none(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """Float columns where SQL returned null show None, not NaN (a null is no number)."""
    for column in columns:
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame


def readable_nulls(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` to show: every null (pandas' ``NaN``, ``NaT`` and ``<NA>``) reads as None.

    Only the columns that hold a null change (to ``object``); their other values keep their own types,
    so counts stay integers and times stay timestamps. ``frame`` itself is left as it is, for the
    computations that follow.
    """
    shown = frame.copy()
    for position, has_null in enumerate(shown.isna().any().tolist()):
        if has_null:
            column = shown.iloc[:, position]
            # A Series keeps its object dtype (an array would be inferred back to datetime); stubs omit Series.
            shown.isetitem(position, column.astype(object).where(column.notna(), None))  # type: ignore[arg-type]
    return shown


def active_sessions(
    table: LakeTable,
    minutes: float,
    now: datetime | None = None,
    lookback_minutes: float = 60.0,
    run_ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Sessions with an event in the last ``minutes``, with their length so far.

    A session's length is ``max(event_ts) - min(event_ts)`` over its events in the
    ``lookback_minutes`` before ``now``, so a session that started before the window counts
    from its real start, and the query still reads only the last hours' files.

    Returns:
        Columns ``session_id``, ``user_id``, ``events``, ``first_event``, ``last_event``,
        ``length_s``; longest first.
    """
    span = window(table, minutes, now, run_ids)
    lookback = Window(span.end - timedelta(minutes=max(lookback_minutes, minutes)), span.end)
    runs, run_args = run_filter(run_ids)
    statement = Statement(
        f"""
        SELECT session_id,
               first(user_id) AS user_id,
               count(*) AS events,
               min(event_ts) AS first_event,
               max(event_ts) AS last_event,
               (unix_micros(max(event_ts)) - unix_micros(min(event_ts))) / 1e6 AS length_s
        FROM {table.name}
        WHERE {WINDOW_SQL} AND session_id IS NOT NULL{runs}
        GROUP BY session_id
        HAVING max(event_ts) > timestamp_micros(:window_start)
        ORDER BY length_s DESC, session_id
        """,
        {**lookback.args, "window_start": to_micros(span.start), **run_args},
    )
    return table.run(statement).toPandas()


# -- the KPI dashboard ------------------------------------------------------------------------
@dataclass(frozen=True)
class Dashboard:
    """The KPI dashboard, the same shape from every engine.

    Attributes:
        totals: One row: ``events``, ``unique_users``, ``unique_sessions``, ``oldest_event``,
            ``newest_event`` (UTC), ``avg_wait_in_stream_s`` (ingest_ts - arrival_ts; glossary.md).
        by_type: ``event_type``, ``events``, most first.
        by_device: ``device_type``, ``events``, ``share`` (of all events), most first.
        statements: The statements the engine ran for it, in its own dialect.
    """

    totals: pd.DataFrame
    by_type: pd.DataFrame
    by_device: pd.DataFrame
    statements: tuple[Statement, ...] = field(default=())


def dashboard_sql(source: str, where: str, micros: str) -> tuple[str, str]:
    """The dashboard's two queries in one engine's dialect (Spark here, DuckDB in ``duckdb_engine``).

    Args:
        source: What to read (a table, with a version clause, or ``iceberg_scan(...)``).
        where: A ``WHERE`` clause with the engine's parameter markers, or empty.
        micros: The engine's timestamp → epoch microseconds function (``unix_micros``, ``epoch_us``).

    Returns:
        ``(totals, counts)``: one row of totals (``oldest_us``/``newest_us`` in epoch microseconds),
        and events by ``event_type`` and ``device_type`` (one scan serves both splits).
    """
    totals = f"""
        SELECT count(*) AS events,
               count(DISTINCT user_id) AS unique_users,
               count(DISTINCT session_id) AS unique_sessions,
               {micros}(min(event_ts)) AS oldest_us,
               {micros}(max(event_ts)) AS newest_us,
               avg({micros}(ingest_ts) - {micros}(arrival_ts)) / 1e6 AS avg_wait_in_stream_s
        FROM {source} {where}
        """
    counts = f"""
        SELECT event_type, device_info.device_type AS device_type, count(*) AS events
        FROM {source} {where}
        GROUP BY ALL
        """
    return totals, counts


def dashboard_from_parts(
    totals: pd.DataFrame, counts: pd.DataFrame, statements: tuple[Statement, ...] = ()
) -> Dashboard:
    """Assemble a :class:`Dashboard` from an engine's two result sets (see :func:`dashboard_sql`).

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
            "avg_wait_in_stream_s": [
                None if pd.isna(row["avg_wait_in_stream_s"]) else float(row["avg_wait_in_stream_s"])
            ],
        }
    )
    counts = counts.astype({"events": "int64"}).fillna({"event_type": "(none)", "device_type": "(none)"})

    def split(column: str) -> pd.DataFrame:
        frame = counts.groupby(column)["events"].sum().reset_index()
        return frame.sort_values(["events", column], ascending=[False, True], ignore_index=True)

    by_device = split("device_type")
    total = by_device["events"].sum()
    by_device["share"] = by_device["events"] / total if total else 0.0
    return Dashboard(shown, split("event_type"), by_device, statements)


def kpi_dashboard(
    table: LakeTable,
    minutes: float | None = None,
    now: datetime | None = None,
    snapshot_id: int | None = None,
    run_ids: Sequence[str] | None = None,
) -> Dashboard:
    """The KPI dashboard over the last ``minutes`` (None: the whole table).

    Args:
        table: The events table.
        minutes: Window length; None reads every event.
        now: Window end (default: the newest trusted event, :func:`resolve_now`).
        snapshot_id: Read this snapshot (so another engine can be compared on the same one).
        run_ids: Count only these runs' events (None: every event).

    Returns:
        The dashboard, with its two statements.
    """
    source = table.versions.as_of(snapshot_id)
    runs, run_args = run_filter(run_ids)
    where = f"WHERE true{runs}" if runs else ""
    args: dict[str, object] = dict(run_args)
    if minutes is not None:
        span = window(table, minutes, now, run_ids)
        where, args = f"WHERE {WINDOW_SQL}{runs}", {**span.args, **run_args}
    totals, counts = (Statement(sql, args) for sql in dashboard_sql(source, where, "unix_micros"))
    return dashboard_from_parts(table.run(totals).toPandas(), table.run(counts).toPandas(), (totals, counts))


def events_per_minute(
    table: LakeTable, minutes: float, now: datetime | None = None, run_ids: Sequence[str] | None = None
) -> pd.DataFrame:
    """Events, unique users and average duration per minute and type over the last ``minutes``.

    The window filters ``event_ts`` itself, so Iceberg prunes on it; a filter on the grouped
    ``minute`` (``date_trunc(...)``) could not be pruned on.

    Returns:
        Columns ``minute``, ``event_type``, ``events``, ``unique_users``, ``avg_duration_ms`` (None
        where no event had a duration), oldest minute first.
    """
    span = window(table, minutes, now, run_ids)
    runs, run_args = run_filter(run_ids)
    statement = Statement(
        f"""
        SELECT date_trunc('minute', event_ts) AS minute,
               event_type,
               count(*) AS events,
               count(DISTINCT user_id) AS unique_users,
               avg(try_cast(properties['duration_ms'] AS DOUBLE)) AS avg_duration_ms
        FROM {table.name}
        WHERE {WINDOW_SQL}{runs}
        GROUP BY 1, 2
        ORDER BY minute, event_type
        """,
        {**span.args, **run_args},
    )
    return nulls_as_none(table.run(statement).toPandas(), "avg_duration_ms")


def late_events(table: LakeTable, run_ids: Sequence[str] | None = None, late_seconds: float = 30.0) -> pd.DataFrame:
    """Events that went on the wire after newer ones, by the hour of event time they belong to.

    On each shard records arrive in sequence-number order; an event is *late* when an event more
    than ``late_seconds`` newer was sent before it on its shard. A late event whose hour is older
    than the hour of that newer event arrives after its hour's partition already received data: a
    streaming ingest then writes one more file into an hour it wrote before.

    Returns:
        ``event_hour`` (UTC), ``events``, ``late_events``, ``late_into_an_earlier_hour``, ``max_late_s``
        (None where no event was late); oldest hour first.
    """
    runs, args = run_filter(run_ids)
    statement = Statement(
        f"""
        WITH sent AS (
          SELECT event_ts,
                 max(event_ts) OVER (
                   PARTITION BY shard_id ORDER BY length(sequence_number), sequence_number
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
                 ) AS newest_sent_before
          FROM {table.name}
          WHERE true{runs}
        ), late AS (
          SELECT event_ts, newest_sent_before,
                 newest_sent_before > event_ts
                   + make_dt_interval(0, 0, 0, CAST(:late_seconds AS DECIMAL(18, 6))) AS is_late
          FROM sent
        )
        SELECT date_trunc('hour', event_ts) AS event_hour,
               count(*) AS events,
               count_if(is_late) AS late_events,
               count_if(is_late AND date_trunc('hour', newest_sent_before) > date_trunc('hour', event_ts))
                 AS late_into_an_earlier_hour,
               max(CASE WHEN is_late THEN
                     (unix_micros(newest_sent_before) - unix_micros(event_ts)) / 1e6 END) AS max_late_s
        FROM late
        GROUP BY 1
        ORDER BY 1
        """,
        {**args, "late_seconds": float(late_seconds)},
    )
    return nulls_as_none(table.run(statement).toPandas(), "max_late_s")


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


def pruning_report(
    table: LakeTable, minutes: float, now: datetime | None = None, run_ids: Sequence[str] | None = None
) -> pd.DataFrame:
    """How many data files a windowed query opens, against how many the table has.

    Returns:
        One row: ``window_minutes``, ``data_files_in_table``, ``data_files_scanned``,
        ``data_files_skipped`` (table files not scanned), ``manifests_scanned``, ``manifests_total``,
        ``rows_read``, ``rows_in_window``.
    """
    import pandas as pd

    span = window(table, minutes, now, run_ids)
    files = len(table.inspect.data_files())
    # Grouped, so Iceberg cannot answer it from file statistics alone (aggregate push-down). Run last,
    # so that it is the table's last_statement. The run filter selects rows; the files read depend
    # on the window alone.
    runs, run_args = run_filter(run_ids)
    grouped = f"SELECT event_type, count(*) AS events FROM {table.name} WHERE {WINDOW_SQL}{runs} GROUP BY event_type"
    query = table.run(Statement(grouped, {**span.args, **run_args}))
    metrics = scan_metrics(query)
    return pd.DataFrame(
        [
            {
                "window_minutes": int(minutes) if float(minutes).is_integer() else minutes,
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
