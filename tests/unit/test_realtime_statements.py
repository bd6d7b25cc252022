"""03 teaches its real-time queries in its cells (CONVENTIONS rule 8), each bounded so Iceberg can prune.

The questions 03 (real-time queries) is about, events by type in a window, active sessions,
events per minute, the KPI dashboard's totals and splits, the windowed query whose files the
pruning report counts and the late events, are typed in ``spark.sql(...)`` calls a learner edits,
not run by an ``icestream.queries.realtime`` helper that prints them. A window's bounds reach Spark
as bound epoch microseconds read by ``timestamp_micros(...)`` (folded into literals, so Iceberg
prunes on them, with no calendar rebase of a datetime literal), and every query counts only the
runs the notebook chose. So are the metadata tables it reads to explain pruning (``files``,
``entries``, ``all_data_files``, ``snapshots``, ``metadata_log_entries``), not ``inspect`` helpers.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.helpers.notebook_code import code_cells

NOTEBOOK = "03_realtime_queries.ipynb"
WINDOW = "event_ts > timestamp_micros(:start) AND event_ts <= timestamp_micros(:end)"
RUNS = "array_contains(split(:run_ids, ','), properties['run_id'])"
# (what the query is, a pattern only its statement matches, whether it is bounded by the window)
TAUGHT = (
    ("events by type", r"avg\(try_cast\(properties\['duration_ms'\] AS DOUBLE\)\) AS avg_duration_ms FROM \{events\} "
                       r"WHERE .* GROUP BY event_type ORDER BY events DESC", True),
    ("active sessions", r"GROUP BY session_id HAVING max\(event_ts\) > timestamp_micros\(:start\)", False),
    ("events per minute", r"SELECT date_trunc\('minute', event_ts\) AS minute, event_type, count\(\*\)", True),
    ("dashboard totals", r"count\(DISTINCT session_id\) AS unique_sessions, .* FROM \{events\} VERSION AS OF "
                         r"\{snapshot_id\}", True),
    ("dashboard by type and device", r"SELECT event_type, device_info\.device_type AS device_type, count\(\*\) AS "
                                     r"events FROM \{events\} VERSION AS OF \{snapshot_id\}", True),
    ("pruning report", r"^SELECT event_type, count\(\*\) AS events FROM \{events\} WHERE .* BY event_type$", True),
    ("late events", r"ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING .* INTERVAL 30 SECONDS AS is_late", False),
)  # fmt: skip
# (what the metadata query shows, a pattern only its statement matches)
METADATA = (
    ("data files in the table", r"^SELECT count\(\*\) AS files FROM \{events\}\.data_files$"),
    ("file statistics", r"readable_metrics\.event_ts\.lower_bound AS lower_bound, .*readable_metrics\.event_ts\."
                        r"upper_bound AS upper_bound, hex\(lower_bounds\[\{\w+\}\]\) .* FROM \{events\}\.data_files"),
    ("manifest entries", r"status .* snapshot_id, sequence_number, .*data_file\.file_path.* FROM \{events\}\.entries "),
    ("file counts", r"FROM \{events\}\.data_files\) AS current_data_files, .*FROM \{events\}\.all_data_files\) "
                    r"AS all_data_files, .*FROM \{events\}\.snapshots\) AS snapshots"),
    ("metadata log", r"latest_snapshot_id.* FROM \{events\}\.metadata_log_entries ORDER BY timestamp"),
)  # fmt: skip
# Plumbing stays a helper: metadata_location() is where DuckDB starts reading, through Iceberg's Java API.
INSPECT_HELPERS = ("snapshots", "data_files", "files", "file_bounds", "entries", "file_counts", "metadata_log")
HELPERS = ("events_by_type", "active_sessions", "events_per_minute", "kpi_dashboard", "pruning_report", "late_events")


def statement_text(node: ast.expr) -> str:
    """A string or f-string as the learner reads it (``{events}`` where a name is formatted in), on one line."""
    if isinstance(node, ast.JoinedStr):
        parts = [
            part.value if isinstance(part, ast.Constant) else "{" + ast.unparse(part.value) + "}"
            for part in node.values
        ]
        text = "".join(parts)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    else:
        text = ast.unparse(node)  # a name: the statement is not in the call
    return " ".join(text.split())


def spark_sql_texts() -> list[str]:
    return [
        statement_text(node.args[0])
        for tree in code_cells(NOTEBOOK)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "spark.sql" and node.args
    ]


def the_statement(pattern: str) -> str:
    found = [text for text in spark_sql_texts() if re.search(pattern, text)]
    assert len(found) == 1, f"{NOTEBOOK}: {len(found)} spark.sql statements match {pattern!r}"
    return found[0]


@pytest.mark.parametrize(("query", "pattern", "windowed"), TAUGHT, ids=[query for query, _, _ in TAUGHT])
def test_each_taught_query_is_typed_in_a_spark_sql_cell(query: str, pattern: str, windowed: bool) -> None:
    statement = the_statement(pattern)
    assert RUNS in statement, f"{query}: counts every run, not the runs the notebook chose"
    if windowed:
        assert WINDOW in statement, f"{query}: its window is not bounds on event_ts that Iceberg can prune on"


def test_the_sessions_read_their_lookback_and_keep_the_active_ones() -> None:
    statement = the_statement(TAUGHT[1][1])
    assert "WHERE event_ts > timestamp_micros(:lookback) AND event_ts <= timestamp_micros(:end)" in statement


def test_no_cell_asks_a_helper_for_a_taught_query() -> None:
    calls = [
        ast.unparse(node.func)
        for tree in code_cells(NOTEBOOK)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) in {f"realtime.{name}" for name in HELPERS}
    ]
    assert calls == [], f"{NOTEBOOK} still runs its lessons through helpers: {calls}"


def test_window_bounds_are_bound_as_epoch_microseconds() -> None:
    """The values behind ``:start``/``:end`` come from ``to_micros``, never a datetime literal Spark would rebase."""
    for tree in code_cells(NOTEBOOK):
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value in {"start", "end", "lookback"}:
                        assert ast.unparse(value).startswith("to_micros("), ast.unparse(node)


@pytest.mark.parametrize(("shows", "pattern"), METADATA, ids=[shows for shows, _ in METADATA])
def test_each_metadata_table_query_is_typed_in_a_spark_sql_cell(shows: str, pattern: str) -> None:
    the_statement(pattern)


def test_no_cell_reads_a_taught_metadata_table_through_inspect() -> None:
    calls = [
        ast.unparse(node.func)
        for tree in code_cells(NOTEBOOK)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in INSPECT_HELPERS
        and ast.unparse(node.func.value).endswith(".inspect")
    ]
    assert calls == [], f"{NOTEBOOK} still reads metadata tables through inspect helpers: {calls}"
