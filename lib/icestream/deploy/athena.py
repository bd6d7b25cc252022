"""Athena on the lake: the workbook's dashboard, time-travel and health questions in Trino's dialect.

Athena (engine version 3, Trino's SQL) reads the same Iceberg tables through the Glue catalog, where
the Glue database is the workbook's namespace. The questions are those that notebooks 03, 04 and 07
ask through :mod:`icestream.queries.realtime`, :mod:`icestream.lake.versions` and
:mod:`icestream.queries.health` in Spark SQL; each :class:`AthenaQuery` says which function answers it
in Spark, what had to change for Trino, and whether DuckDB can run it here.

Values reach a query as Athena *execution parameters* (``?`` markers, given in order when the query
runs from the console or ``start-query-execution --execution-parameters``), never as text put into
the SQL. Table names come from :class:`~icestream.config.Settings` and pass the identifier validator.
Times are ISO-8601 strings with an offset (``'2026-11-21T05:40:00Z'``): a window is ``(start, end]``
of ``event_ts``, the same bounds as :data:`icestream.lake.window.WINDOW_SQL`.

:func:`athena_resources` gives the CloudFormation resources: a workgroup (engine version 3, results
encrypted with the stack's key under the artifacts prefix, configuration enforced, a cap on bytes
scanned per query) and one named query per question.

Trino's differences from Spark that shaped the SQL (Trino docs: functions and the Iceberg connector):
a map subscript fails on a missing key (``element_at`` returns null instead); there is no ``first``
(``min_by`` is used); ``GROUP BY ALL`` means grouping sets there, not "every selected column";
metadata tables are ``"<table>$files"``, not ``<table>.files``; time travel is ``FOR VERSION AS OF``
and ``FOR TIMESTAMP AS OF`` after the table name; epoch arithmetic uses ``to_unixtime`` (seconds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from icestream.config import REJECTS_SUFFIX, Settings
from icestream.lake.summary import BATCH_KEY, FIRST_ARRIVAL_KEY, LAST_ARRIVAL_KEY
from icestream.validation import validate_identifier

__all__ = [
    "ATHENA_ENGINE_VERSION",
    "BYTES_SCANNED_CUTOFF",
    "METADATA_COLUMNS",
    "AthenaQuery",
    "athena_resources",
    "named_queries",
    "parameter_count",
    "workgroup_resource",
]

ATHENA_ENGINE_VERSION = "Athena engine version 3"
BYTES_SCANNED_CUTOFF = 10 * 2**30  # a runaway query stops after 10 GiB scanned (about USD 0.05 at USD 5/TB)
WORKGROUP_ID = "AthenaWorkGroup"

# Columns of Trino's Iceberg metadata tables that these queries read (Trino docs, "Iceberg connector",
# metadata tables; Athena lists the same tables in "Query Iceberg table metadata"). Spark's names differ
# in places: its partitions table says total_data_file_size_in_bytes where Trino says total_size.
METADATA_COLUMNS: dict[str, frozenset[str]] = {
    "files": frozenset(("content", "file_path", "file_format", "record_count", "file_size_in_bytes")),
    "manifests": frozenset(
        (
            "path",
            "length",
            "partition_spec_id",
            "added_snapshot_id",
            "added_data_files_count",
            "added_rows_count",
            "existing_data_files_count",
            "existing_rows_count",
            "deleted_data_files_count",
            "deleted_rows_count",
        )
    ),
    "partitions": frozenset(("partition", "record_count", "file_count", "total_size")),
    "snapshots": frozenset(("committed_at", "snapshot_id", "parent_id", "operation", "manifest_list", "summary")),
    "history": frozenset(("made_current_at", "snapshot_id", "parent_id", "is_current_ancestor")),
}

# Why DuckDB cannot answer a kind of query here (the integration test runs every other one).
NO_METADATA_TABLES = (
    "DuckDB's iceberg extension has no $files/$manifests/$partitions/$snapshots/$history tables "
    "(only iceberg_snapshots() and iceberg_metadata(), with other columns)"
)
NO_TIME_TRAVEL_CLAUSE = (
    "DuckDB reads a version through iceberg_scan(..., snapshot_from_id/snapshot_from_timestamp), "
    "not a FOR VERSION/TIMESTAMP AS OF clause, and sqlglot does not rewrite one into the other"
)


@dataclass(frozen=True)
class AthenaQuery:
    """One named query for Athena.

    Attributes:
        key: Short name in CamelCase; the resource is ``AthenaQuery<key>``.
        notebook: The notebook whose question it answers (``03``, ``04``, ``09``).
        description: What it answers, and what its ``?`` parameters are, in order.
        sql: The statement, Trino's dialect.
        parameters: Names of the ``?`` execution parameters, in order.
        spark_function: The library function that answers the same question in Spark SQL.
        trino_changes: What differs from that function's Spark SQL ("" when Athena runs the same text, the
            table named without catalog and database).
        duckdb_blocker: Why DuckDB cannot run it here ("" when it can, after transpiling).
        metadata_table: The Iceberg metadata table it reads (``files``, ...), or "" for the data.
    """

    key: str
    notebook: str
    description: str
    sql: str
    parameters: tuple[str, ...]
    spark_function: str
    trino_changes: str
    duckdb_blocker: str = ""
    metadata_table: str = ""

    @property
    def resource_id(self) -> str:
        """The logical id of its ``AWS::Athena::NamedQuery`` resource."""
        return f"AthenaQuery{self.key}"


def _window(column: str = "event_ts") -> str:
    return f"{column} > from_iso8601_timestamp(?) AND {column} <= from_iso8601_timestamp(?)"


DURATION = "try_cast(element_at(properties, 'duration_ms') AS double)"
WINDOW_PARAMETERS = ("window_start", "window_end")
MAP_SUBSCRIPT = "properties['duration_ms'] becomes element_at(...): Trino's subscript fails on a missing key"


def _dashboard(table: str) -> list[AthenaQuery]:
    return [
        AthenaQuery(
            "EventsByType",
            "03",
            "Events of a window by type: count, unique users, average duration. Parameters: window start, "
            "window end (ISO-8601 with offset); the window is (start, end] of event_ts.",
            f"""SELECT event_type,
       count(*) AS events,
       count(DISTINCT user_id) AS unique_users,
       avg({DURATION}) AS avg_duration_ms
FROM {table}
WHERE {_window()}
GROUP BY event_type
ORDER BY events DESC, event_type""",
            WINDOW_PARAMETERS,
            "icestream.queries.realtime.events_by_type",
            f"{MAP_SUBSCRIPT}; bounds are ISO-8601 strings instead of timestamp_micros(:start)",
        ),
        AthenaQuery(
            "EventsPerMinute",
            "03",
            "Events, unique users and average duration per minute and type in a window. Parameters: window "
            "start, window end.",
            f"""SELECT date_trunc('minute', event_ts) AS minute,
       event_type,
       count(*) AS events,
       count(DISTINCT user_id) AS unique_users,
       avg({DURATION}) AS avg_duration_ms
FROM {table}
WHERE {_window()}
GROUP BY 1, 2
ORDER BY minute, event_type""",
            WINDOW_PARAMETERS,
            "icestream.queries.realtime.events_per_minute",
            f"{MAP_SUBSCRIPT}; bounds are ISO-8601 strings",
        ),
        AthenaQuery(
            "KpiTotals",
            "03",
            "The dashboard's totals over the whole table: events, unique users and sessions, oldest and "
            "newest event, average wait in the stream (ingest_ts - Kinesis arrival) in seconds.",
            f"""SELECT count(*) AS events,
       count(DISTINCT user_id) AS unique_users,
       count(DISTINCT session_id) AS unique_sessions,
       min(event_ts) AS oldest_event,
       max(event_ts) AS newest_event,
       avg(to_unixtime(ingest_ts) - to_unixtime(arrival_ts)) AS avg_wait_in_stream_s
FROM {table}""",
            (),
            "icestream.queries.realtime.kpi_dashboard (totals)",
            "unix_micros(...) / 1e6 becomes to_unixtime(...) (seconds); times are returned as timestamps",
        ),
        AthenaQuery(
            "KpiByDevice",
            "03",
            "The dashboard's device split over the whole table: events per device type and share of all.",
            f"""SELECT coalesce(device_info.device_type, '(none)') AS device_type,
       count(*) AS events,
       count(*) / sum(CAST(count(*) AS double)) OVER () AS share
FROM {table}
GROUP BY 1
ORDER BY events DESC, device_type""",
            (),
            "icestream.queries.realtime.kpi_dashboard (by_device)",
            "Spark groups with GROUP BY ALL, which in Trino means grouping sets; the share is a window sum "
            "here instead of pandas",
        ),
        AthenaQuery(
            "ActiveSessions",
            "03",
            "Sessions with an event in the window, with their length so far over a longer look-back. "
            "Parameters: look-back start, window end, window start.",
            f"""SELECT session_id,
       min_by(user_id, event_ts) AS user_id,
       count(*) AS events,
       min(event_ts) AS first_event,
       max(event_ts) AS last_event,
       to_unixtime(max(event_ts)) - to_unixtime(min(event_ts)) AS length_s
FROM {table}
WHERE {_window()} AND session_id IS NOT NULL
GROUP BY session_id
HAVING max(event_ts) > from_iso8601_timestamp(?)
ORDER BY length_s DESC, session_id""",
            ("lookback_start", "window_end", "window_start"),
            "icestream.queries.realtime.active_sessions",
            "Trino has no first(); min_by(user_id, event_ts) takes the user of the session's first event",
        ),
    ]


def _time_travel(table: str) -> list[AthenaQuery]:
    counts = "SELECT event_type, count(*) AS events\nFROM {source}\nGROUP BY event_type\nORDER BY event_type"
    summary = ", ".join(
        f"CAST(element_at(summary, '{key}') AS bigint) AS {alias}"
        for key, alias in (("added-records", "added_records"), ("total-records", "total_records"))
    )
    return [
        AthenaQuery(
            "CountsAtVersion",
            "04",
            "Events by type as of a snapshot. Parameter: the snapshot id (a bigint from the snapshots query).",
            counts.format(source=f"{table} FOR VERSION AS OF ?"),
            ("snapshot_id",),
            "icestream.lake.versions.Versions.counts_by_type (snapshot id)",
            "VERSION AS OF <id> becomes FOR VERSION AS OF ?",
            NO_TIME_TRAVEL_CLAUSE,
        ),
        AthenaQuery(
            "CountsAtTime",
            "04",
            "Events by type as of a point in time. Parameter: the time (ISO-8601 with offset).",
            counts.format(source=f"{table} FOR TIMESTAMP AS OF from_iso8601_timestamp(?)"),
            ("as_of",),
            "icestream.lake.versions.Versions.counts_by_type (datetime)",
            "TIMESTAMP AS OF <literal> becomes FOR TIMESTAMP AS OF from_iso8601_timestamp(?)",
            NO_TIME_TRAVEL_CLAUSE,
        ),
        AthenaQuery(
            "Snapshots",
            "04",
            "The table's snapshots, oldest first, with the rows each added and the total after it.",
            f"""SELECT committed_at, snapshot_id, parent_id, operation, {summary}
FROM "{table}$snapshots"
ORDER BY committed_at, snapshot_id""",
            (),
            "icestream.lake.inspect.Inspect.snapshots",
            "<table>.snapshots becomes \"<table>$snapshots\"; summary['k'] becomes element_at(summary, 'k')",
            NO_METADATA_TABLES,
            "snapshots",
        ),
        AthenaQuery(
            "History",
            "04",
            "Which snapshot was current when, and whether it is an ancestor of the current one.",
            f"""SELECT made_current_at, snapshot_id, parent_id, is_current_ancestor
FROM "{table}$history"
ORDER BY made_current_at""",
            (),
            "icestream.lake.inspect.Inspect.history",
            '<table>.history becomes "<table>$history"',
            NO_METADATA_TABLES,
            "history",
        ),
    ]


def _health(table: str, rejects: str) -> list[AthenaQuery]:
    freshness = "(to_unixtime(committed_at) * 1000 - CAST(element_at(summary, '{key}') AS bigint)) / 1000.0"
    return [
        AthenaQuery(
            "DataFiles",
            "09",
            "Current files by content (0 data, 1 position deletes, 2 equality deletes): count, rows, bytes, "
            "and how many are below a size. Parameter: the small-file size in bytes (Spark's health report "
            "uses 75 % of write.target-file-size-bytes).",
            f"""SELECT content,
       count(*) AS files,
       sum(record_count) AS records,
       sum(file_size_in_bytes) AS bytes,
       count_if(file_size_in_bytes < ?) AS files_below_size
FROM "{table}$files"
GROUP BY content
ORDER BY content""",
            ("small_file_bytes",),
            "icestream.queries.health.collect_stats (data_files, delete_files, records, data_bytes)",
            '<table>.files becomes "<table>$files"; a small file is counted whether or not it shares its '
            "partition (Spark's report counts only files that share one)",
            NO_METADATA_TABLES,
            "files",
        ),
        AthenaQuery(
            "Partitions",
            "09",
            "Partitions: how many, and the files, rows and bytes in the fullest and in all of them.",
            f"""SELECT count(*) AS partitions,
       sum(file_count) AS data_files,
       sum(record_count) AS records,
       sum(total_size) AS data_bytes,
       max(file_count) AS max_files_per_partition
FROM "{table}$partitions\"""",
            (),
            "icestream.queries.health.collect_stats (partitions, max_files_per_partition)",
            '<table>.partitions becomes "<table>$partitions"; total_data_file_size_in_bytes is total_size',
            NO_METADATA_TABLES,
            "partitions",
        ),
        AthenaQuery(
            "Manifests",
            "09",
            "Manifests of the current snapshot: how many, their bytes, and the data files they track.",
            f"""SELECT count(*) AS manifests,
       sum(length) AS manifest_bytes,
       sum(added_data_files_count + existing_data_files_count) AS live_data_files,
       sum(deleted_data_files_count) AS deleted_data_files
FROM "{table}$manifests\"""",
            (),
            "icestream.queries.health.collect_stats (manifests)",
            '<table>.manifests becomes "<table>$manifests"',
            NO_METADATA_TABLES,
            "manifests",
        ),
        AthenaQuery(
            "BatchFreshness",
            "09",
            "Each snapshot's freshness in seconds (commit minus arrival), from the ingest's keys in its summary.",
            f"""SELECT snapshot_id, committed_at,
       CAST(element_at(summary, '{BATCH_KEY}') AS bigint) AS batch_id,
       CAST(element_at(summary, 'added-records') AS bigint) AS added_records,
       {freshness.format(key=FIRST_ARRIVAL_KEY)} AS freshness_oldest_s,
       {freshness.format(key=LAST_ARRIVAL_KEY)} AS freshness_newest_s
FROM "{table}$snapshots"
ORDER BY committed_at, snapshot_id""",
            (),
            "icestream.queries.report.batch_freshness",
            "unix_millis(committed_at) becomes to_unixtime(committed_at) * 1000; summary['k'] becomes element_at",
            NO_METADATA_TABLES,
            "snapshots",
        ),
        AthenaQuery(
            "RejectsByReason",
            "09",
            "Records the ingest could not accept, by reason, with one example detail each.",
            f"""SELECT reason, count(*) AS records, min(detail) AS example_detail
FROM {rejects}
GROUP BY reason
ORDER BY records DESC, reason""",
            (),
            "icestream.queries.report.rejects_by_reason",
            "",
        ),
    ]


def named_queries(settings: Settings | None = None) -> tuple[AthenaQuery, ...]:
    """Every named query, for the events table of ``settings`` (default: the default settings).

    The names are unqualified: a named query runs in its Glue database (the namespace).

    Returns:
        The queries: dashboard (03), time travel (04), health (07).
    """
    settings = settings or Settings()
    table = validate_identifier(settings.table, "table")
    rejects = settings.companion(REJECTS_SUFFIX).table  # validated by companion
    return (*_dashboard(table), *_time_travel(table), *_health(table, rejects))


def parameter_count(sql: str) -> int:
    """How many ``?`` execution parameters a statement has (none of these queries has ``?`` in a string)."""
    return len(re.findall(r"\?", re.sub(r"'[^']*'", "''", sql)))


def workgroup_resource() -> dict[str, Any]:
    """The ``AWS::Athena::WorkGroup``: engine 3, encrypted results under the artifacts prefix, enforced."""
    return {
        "Type": "AWS::Athena::WorkGroup",
        "Properties": {
            "Name": {"Fn::Sub": "icestream-${AWS::StackName}"},
            "Description": "Athena (Trino) queries on the icestream tables in the Glue database of this stack",
            "State": "ENABLED",
            "WorkGroupConfiguration": {
                "EnforceWorkGroupConfiguration": True,
                "PublishCloudWatchMetricsEnabled": True,
                "BytesScannedCutoffPerQuery": BYTES_SCANNED_CUTOFF,
                "EngineVersion": {"SelectedEngineVersion": ATHENA_ENGINE_VERSION},
                "ResultConfiguration": {
                    "OutputLocation": {"Fn::Sub": "s3://${WarehouseBucket}/${ArtifactsPrefix}/athena-results/"},
                    "EncryptionConfiguration": {"EncryptionOption": "SSE_KMS", "KmsKey": {"Fn::Sub": "${DataKey.Arn}"}},
                },
            },
        },
    }


def athena_resources(settings: Settings | None = None) -> dict[str, Any]:
    """The CloudFormation resources for Athena: the workgroup and one named query per question.

    Uses the template's parameters ``Namespace`` and ``ArtifactsPrefix`` and resources
    ``WarehouseBucket`` and ``DataKey``.

    Returns:
        Logical id → resource, to merge into the template's ``Resources``.
    """
    resources: dict[str, Any] = {WORKGROUP_ID: workgroup_resource()}
    for query in named_queries(settings):
        resources[query.resource_id] = {
            "Type": "AWS::Athena::NamedQuery",
            "Properties": {
                "Name": f"icestream {query.notebook} {query.key}",
                "Description": query.description[:1024],
                "Database": {"Ref": "Namespace"},
                "WorkGroup": {"Ref": WORKGROUP_ID},
                "QueryString": query.sql,
            },
        }
    return resources
