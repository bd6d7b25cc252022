"""The real_time_metrics dashboard, answered from the metrics table or from the events, in Spark or DuckDB.

Two answers make the dashboard: the recent groups (every minute, event type and device from
``since`` on: events, exact unique users, average duration) and the roll-up of the whole table by
event type and device (events, average duration). From the metrics table
(:mod:`icestream.lake.continuous_aggregate`) both read a few thousand rows; from the events table, every event.
They are equal: counts add up, and an average rolls up as the sum of the durations over their
count, which the metrics table keeps. Unique users are exact per group; across groups they do
not add up, so the roll-up leaves them out (the users arrays could answer it, at a cost).

Each function here returns a :class:`MetricsDashboard` whose ``statements`` are the SQL it ran, so
a notebook shows them; the bench (``bench/bench_metrics.py``) times the four ways side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from icestream.lake.continuous_aggregate import full_query
from icestream.lake.statement import Statement
from icestream.queries.duckdb_engine import duckdb_statement, statement_frame

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from icestream.lake.table import LakeTable

RECENT_COLUMNS = ("minute_us", "event_type", "device_type", "events", "unique_users", "avg_duration_ms")
ROLLUP_COLUMNS = ("event_type", "device_type", "events", "avg_duration_ms")


@dataclass(frozen=True)
class MetricsDashboard:
    """The recent groups (``minute_us`` in epoch microseconds) and the roll-up by type and device, sorted."""

    recent: pd.DataFrame
    rollup: pd.DataFrame
    statements: tuple[Statement, ...] = field(default=())

    def equals(self, other: MetricsDashboard) -> bool:
        """The same numbers (another engine, or the other source)."""
        return _same(self.recent, other.recent) and _same(self.rollup, other.rollup)


def _same(left: pd.DataFrame, right: pd.DataFrame) -> bool:
    if len(left) != len(right):
        return False
    return all(
        [None if _missing(value) else value for value in left[column]]
        == [None if _missing(value) else value for value in right[column]]
        for column in left.columns
    )


def _missing(value: object) -> bool:
    return value is None or value != value  # NaN is the one value unequal to itself


def dashboard_sql(source: str, since: str, micros: str, from_metrics: bool) -> tuple[str, str]:
    """The dashboard's two queries.

    Args:
        source: What to read: the metrics table or the events table (a name, or ``iceberg_scan(...)``).
        since: The SQL of the first minute shown (a bound parameter converted to a timestamp).
        micros: The engine's timestamp → epoch microseconds function (``unix_micros``, ``epoch_us``).
        from_metrics: ``source`` is the metrics table (else the events table).

    Returns:
        ``(recent, rollup)``.
    """
    if from_metrics:
        recent = f"""
            SELECT {micros}(minute) AS minute_us, event_type, device_type, events, unique_users, avg_duration_ms
            FROM {source}
            WHERE minute >= {since}
            ORDER BY 1, 2, 3"""
        rollup = f"""
            SELECT event_type, device_type, sum(events) AS events,
                   sum(duration_sum) / nullif(sum(duration_count), 0) AS avg_duration_ms
            FROM {source}
            GROUP BY 1, 2
            ORDER BY 1, 2"""
        return recent, rollup
    grouped = full_query(source, f"WHERE event_ts >= {since}")
    recent = f"""
        SELECT {micros}(minute) AS minute_us, event_type, device_type, events, unique_users, avg_duration_ms
        FROM ({grouped})
        ORDER BY 1, 2, 3"""
    rollup = f"""
        SELECT event_type, device_info.device_type AS device_type, count(*) AS events,
               avg(TRY_CAST(properties['duration_ms'] AS DOUBLE)) AS avg_duration_ms
        FROM {source}
        GROUP BY 1, 2
        ORDER BY 1, 2"""
    return recent, rollup


def _assembled(recent: pd.DataFrame, rollup: pd.DataFrame, statements: tuple[Statement, ...]) -> MetricsDashboard:
    recent = recent.astype({"minute_us": "int64", "events": "int64", "unique_users": "int64"})
    return MetricsDashboard(recent, rollup.astype({"events": "int64"}), statements)


def spark_dashboard(table: LakeTable, since: datetime, from_metrics: bool) -> MetricsDashboard:
    """The dashboard in Spark, from the metrics table (``from_metrics``) or the events table ``table``.

    Args:
        table: The metrics table or the events table.
        since: The first minute shown (aware, on a whole minute).
        from_metrics: Whether ``table`` is the metrics table.
    """
    args = {"since": int(since.timestamp())}
    recent, rollup = (
        Statement(sql, args if ":since" in sql else {})
        for sql in dashboard_sql(table.name, "timestamp_seconds(:since)", "unix_micros", from_metrics)
    )
    return _assembled(table.run(recent).toPandas(), table.run(rollup).toPandas(), (recent, rollup))


def duckdb_dashboard(
    connection: duckdb.DuckDBPyConnection, location: str, since: datetime, from_metrics: bool
) -> MetricsDashboard:
    """The dashboard in DuckDB, from a table's metadata file (``LakeTable.inspect.metadata_location``)."""
    statements = tuple(
        duckdb_statement(sql, {"location": location, **({"since": int(since.timestamp())} if "$since" in sql else {})})
        for sql in dashboard_sql("iceberg_scan($location)", "to_timestamp($since)", "epoch_us", from_metrics)
    )
    recent, rollup = (statement_frame(connection, statement) for statement in statements)
    return _assembled(recent, rollup, statements)
