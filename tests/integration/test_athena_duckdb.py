"""The Athena named queries, transpiled from Trino to DuckDB, answer as Spark does on a real local table.

Each query that DuckDB can run (``AthenaQuery.duckdb_blocker`` empty) is transpiled with sqlglot
(``read="trino", write="duckdb"``) and run unchanged against views named as the tables, each view an
``iceberg_scan`` of the table's current metadata file; its answer is compared with the library's own
Spark function for the same question. The others (time travel, metadata tables) carry their reason in
the library, and DuckDB is shown to refuse them, so a reason that stops being true fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import duckdb
import pandas as pd
import pytest
import sqlglot

from icestream.deploy import athena
from icestream.lake.table import LakeTable
from icestream.queries import duckdb_engine as duck
from icestream.queries import realtime, report
from icestream.synthetic.generator import backfill_config
from icestream.timestamps import to_micros
from tests.conftest import generated_table

MINUTES, LOOKBACK_MINUTES = 20, 60


@pytest.fixture(scope="module")
def lake(spark):
    """A 2-hour table of about 5,000 events, and its rejects table with some rows.

    A file load counts bad records without keeping them, so the rejects here are copies of events
    with a made-up reason (only the shape of the answer matters).
    """
    end = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    with generated_table(spark, "athena", backfill_config(hours=2, count=5000, end=end, seed=8), 2000) as made:
        local = made[0]
        try:
            spark.sql(
                f"""INSERT INTO {local.rejects_table_name}
                SELECT CAST(event_id AS BINARY), event_id, concat('not_', event_type), concat('example ', event_id), 0,
                       shard_id, sequence_number, partition_key, arrival_ts, ingest_ts
                FROM {local.table_name} WHERE event_ts < timestamp_micros({to_micros(end - timedelta(minutes=110))})"""
            )
            yield local, LakeTable(spark, local.table_name), LakeTable(spark, local.rejects_table_name)
        finally:
            spark.sql(f"DROP TABLE IF EXISTS {local.rejects_table_name} PURGE")


@pytest.fixture(scope="module")
def connection(lake):
    """DuckDB with one view per table, named as Athena sees it, reading the table's current metadata file."""
    local, events, rejects = lake
    con = duck.connect()
    for name, table in ((local.table, events), (f"{local.table}_rejects", rejects)):
        location, _ = table.inspect.metadata_location()
        # A view takes no bind parameter; the location is the test's own warehouse path, quoted for SQL.
        con.execute("CREATE VIEW {} AS SELECT * FROM iceberg_scan('{}')".format(name, location.replace("'", "''")))
    yield con
    con.close()


def on_duckdb(connection: duckdb.DuckDBPyConnection, query: athena.AthenaQuery, values: dict) -> pd.DataFrame:
    """The query transpiled to DuckDB, run with its parameters in order."""
    sql = sqlglot.transpile(query.sql, read="trino", write="duckdb")[0]
    return connection.execute(sql, [values[name] for name in query.parameters]).to_arrow_table().to_pandas()


def utc(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """Times as naive UTC (Spark gives naive session-time values, DuckDB aware ones), floats as floats."""
    for column in columns:
        values = pd.to_datetime(frame[column], utc=True)
        frame[column] = values.dt.tz_localize(None).astype("datetime64[us]")
    return frame.reset_index(drop=True)


def floats(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    for column in columns:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    return frame


def events_by_type(lake, duck_answer, values) -> None:
    expected = realtime.events_by_type(lake[1], MINUTES, now=values["now"])
    pd.testing.assert_frame_equal(
        floats(duck_answer, "avg_duration_ms"), floats(expected, "avg_duration_ms"), check_dtype=False
    )


def events_per_minute(lake, duck_answer, values) -> None:
    expected = realtime.events_per_minute(lake[1], MINUTES, now=values["now"])
    pd.testing.assert_frame_equal(
        floats(utc(duck_answer, "minute"), "avg_duration_ms"),
        floats(utc(expected, "minute"), "avg_duration_ms"),
        check_dtype=False,
    )


def kpi_totals(lake, duck_answer, values) -> None:
    expected = realtime.kpi_dashboard(lake[1]).totals
    columns = ["events", "unique_users", "unique_sessions", "oldest_event", "newest_event", "avg_wait_in_stream_s"]
    pd.testing.assert_frame_equal(
        utc(duck_answer[columns], "oldest_event", "newest_event"),
        utc(expected[columns], "oldest_event", "newest_event"),
        check_dtype=False,
        rtol=1e-9,
    )


def kpi_by_device(lake, duck_answer, values) -> None:
    expected = realtime.kpi_dashboard(lake[1]).by_device
    pd.testing.assert_frame_equal(duck_answer, expected, check_dtype=False, rtol=1e-12)


def active_sessions(lake, duck_answer, values) -> None:
    expected = realtime.active_sessions(lake[1], MINUTES, now=values["now"], lookback_minutes=LOOKBACK_MINUTES)
    times = ("first_event", "last_event")
    # to_unixtime gives seconds as a double (about 0.2 µs apart at today's epoch): lengths agree to a microsecond.
    pd.testing.assert_frame_equal(utc(duck_answer, *times), utc(expected, *times), check_dtype=False, atol=1e-6)


def rejects_by_reason(lake, duck_answer, values) -> None:
    expected = report.rejects_by_reason(lake[2].spark, lake[0], table=lake[2])
    pd.testing.assert_frame_equal(duck_answer, expected, check_dtype=False)


# The Spark answer each query DuckDB can run is compared with (a new runnable query needs one here).
COMPARED: dict[str, Callable[..., None]] = {
    "EventsByType": events_by_type,
    "EventsPerMinute": events_per_minute,
    "KpiTotals": kpi_totals,
    "KpiByDevice": kpi_by_device,
    "ActiveSessions": active_sessions,
    "RejectsByReason": rejects_by_reason,
}


@pytest.fixture(scope="module")
def values(lake) -> dict:
    """The execution parameters, as Athena would be given them: ISO-8601 times with an offset."""
    now = realtime.resolve_now(lake[1])
    return {
        "now": now,
        "window_end": now.isoformat(),
        "window_start": (now - timedelta(minutes=MINUTES)).isoformat(),
        "lookback_start": (now - timedelta(minutes=LOOKBACK_MINUTES)).isoformat(),
    }


def queries(runnable: bool) -> list[athena.AthenaQuery]:
    return [query for query in athena.named_queries() if (not query.duckdb_blocker) == runnable]


def test_every_query_duckdb_can_run_is_compared() -> None:
    assert {query.key for query in queries(runnable=True)} == set(COMPARED)


@pytest.mark.parametrize("query", queries(runnable=True), ids=lambda query: query.key)
def test_duckdb_answers_the_athena_query_as_spark_does(lake, connection, values, query) -> None:
    local = lake[0]
    query = next(mine for mine in athena.named_queries(local) if mine.key == query.key)
    answer = on_duckdb(connection, query, values)
    assert len(answer) > 0, f"{query.key} returned no row: the comparison would check nothing"
    COMPARED[query.key](lake, answer, values)


@pytest.mark.parametrize("query", queries(runnable=False), ids=lambda query: query.key)
def test_duckdb_refuses_what_the_library_says_it_cannot_run(lake, connection, values, query) -> None:
    query = next(mine for mine in athena.named_queries(lake[0]) if mine.key == query.key)
    arguments = {name: values.get(name, "2026-11-21T05:00:00+00:00") for name in query.parameters}
    arguments |= {"snapshot_id": lake[1].inspect.current_snapshot_id(), "small_file_bytes": 1}
    with pytest.raises((duckdb.Error, sqlglot.errors.SqlglotError)):
        on_duckdb(connection, query, arguments)
