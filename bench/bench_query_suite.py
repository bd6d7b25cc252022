"""Session and anomaly queries (item 5, with ``bench_queries.py``'s dashboard), Spark and DuckDB side by side.

``bench/bench_queries.py`` times the KPI dashboard; this times the two other questions the
workbook asks of the table, on the same table (``bench_queries.WAREHOUSE``, built by the same
recipe: ``load_payloads`` of ``backfill_config(hours=24, count=N, seed=2026)``, reused while it exists):

- **sessions**: ``icestream.queries.realtime.active_sessions`` (sessions active in the last 15 minutes, with
  their length over a 60-minute lookback; pruned to the last hours' files), and the same SQL in DuckDB;
- **anomaly**: ``icestream.queries.anomaly.window_counts`` over the whole table (5-minute windows sliding by 1
  minute, per event type), then ``score_windows`` (median/MAD in pandas); in DuckDB the same counts by SQL,
  then the same ``complete_windows`` and ``score_windows``.

Both engines read the same snapshot; their answers are checked equal before timing. Each is warmed
up once and timed ``--runs`` times; medians and the ratio Spark / DuckDB are reported for every
``--events`` size (1,000,000 by default; ``--events 1000000,10000000`` for the full suite, which
builds the 10M table once: about 17 minutes).

Run: ``.venv/bin/python bench/bench_query_suite.py`` (about 1 minute with the table built), or ``make bench``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_queries  # the dashboard benchmark: its warehouse and timing helper, shared on purpose
from common import banner, command_line, summary, write_results

SEED = 2026
SESSION_MINUTES, LOOKBACK_MINUTES = 15, 60


def ensure_table(spark: Any, events: int) -> str:
    """The table ``bench_queries.py`` uses for ``events``; built by the same recipe if missing."""
    from icestream.config import load_settings
    from icestream.file_load.bulk import load_payloads
    from icestream.lake import ddl
    from icestream.synthetic.generator import backfill_config, generate

    settings = load_settings(table=f"bench_{events}_s{SEED}")
    ddl.create_namespace(spark, settings)
    ddl.create_events_table(spark, settings)
    name = settings.table_name
    if spark.table(name).isEmpty():
        began = time.perf_counter()
        config = backfill_config(hours=24, count=events, end=datetime(2026, 11, 21, tzinfo=UTC), seed=SEED,
                                 bad_rate=0.0, duplicate_rate=0.0)  # fmt: skip
        records, _ = generate(config)
        load_payloads(spark, name, ((r.data, r.partition_key) for r in records), chunk_rows=250_000)
        print(f"built {name} in {time.perf_counter() - began:.0f} s", flush=True)
    return name


def duckdb_frame(connection: Any, sql: str, parameters: dict[str, object]) -> Any:
    """Run DuckDB SQL with ``$name`` parameters as the library does; its rows as a pandas frame."""
    from icestream.queries.duckdb_engine import duckdb_statement, statement_frame

    return statement_frame(connection, duckdb_statement(sql, parameters))


def duckdb_sessions(connection: Any, location: str, now: datetime) -> Any:
    """``realtime.active_sessions`` in DuckDB SQL (same window, lookback and ordering)."""
    from icestream.timestamps import to_micros

    end = to_micros(now)
    parameters = {
        "location": location,
        "start": end - LOOKBACK_MINUTES * 60_000_000,
        "end": end,
        "window_start": end - SESSION_MINUTES * 60_000_000,
    }
    return duckdb_frame(
        connection,
        """
        SELECT session_id, first(user_id) AS user_id, count(*) AS events,
               min(event_ts) AS first_event, max(event_ts) AS last_event,
               (epoch_us(max(event_ts)) - epoch_us(min(event_ts))) / 1e6 AS length_s
        FROM iceberg_scan($location)
        WHERE event_ts > make_timestamptz($start::BIGINT) AND event_ts <= make_timestamptz($end::BIGINT)
          AND session_id IS NOT NULL
        GROUP BY session_id
        HAVING max(event_ts) > make_timestamptz($window_start::BIGINT)
        ORDER BY length_s DESC, session_id
        """,
        parameters,
    )


def duckdb_detect(connection: Any, location: str, start: datetime, end: datetime) -> Any:
    """``anomaly.score_windows`` over window counts computed by DuckDB instead of Spark."""
    import pandas as pd

    from icestream.queries import anomaly
    from icestream.timestamps import to_micros

    options = anomaly.DetectorOptions()
    slide_us, window_us = options.slide_minutes * 60_000_000, options.window_minutes * 60_000_000
    counts = duckdb_frame(
        connection,
        """
        WITH events AS (
            SELECT epoch_us(event_ts) AS ts, event_type FROM iceberg_scan($location)
            WHERE event_ts >= make_timestamptz($start::BIGINT) AND event_ts < make_timestamptz($end::BIGINT)
        ), windows AS (
            SELECT (ts // $slide) * $slide - k * $slide AS window_us, ts, event_type
            FROM events, range(0, $steps) AS steps(k)
        )
        SELECT window_us, event_type, count(*) AS count FROM windows
        WHERE ts < window_us + $window GROUP BY ALL
        """,
        {"location": location, "start": to_micros(start), "end": to_micros(end), "slide": slide_us,
         "window": window_us, "steps": math.ceil(options.window_minutes / options.slide_minutes)},
    )  # fmt: skip
    counts["window_start"] = pd.to_datetime(counts["window_us"], unit="us", utc=True)
    return anomaly.score_windows(anomaly.complete_windows(counts, start, end, options), options)


def measure(spark: Any, events: int, runs: int) -> dict[str, Any]:
    """Both queries on both engines for one table size."""
    from icestream.lake import LakeTable
    from icestream.lake.window import event_time_range
    from icestream.queries import anomaly, realtime
    from icestream.queries import duckdb_engine as duck

    name = ensure_table(spark, events)
    table = LakeTable(spark, name)
    location, snapshot_id = table.inspect.metadata_location()
    connection = duck.connect()
    oldest, newest = event_time_range(table)
    start = oldest.replace(second=0, microsecond=0) + timedelta(minutes=1)
    end = newest.replace(second=0, microsecond=0)
    workloads = {
        "sessions": (
            lambda: realtime.active_sessions(table, SESSION_MINUTES, now=newest, lookback_minutes=LOOKBACK_MINUTES),
            lambda: duckdb_sessions(connection, location, newest),
        ),
        "anomaly": (
            lambda: anomaly.score_windows(anomaly.window_counts(spark, name, start, end)),
            lambda: duckdb_detect(connection, location, start, end),
        ),
    }
    result: dict[str, Any] = {"events": int(spark.table(name).count()), "table": name, "snapshot_id": snapshot_id}
    for query, (on_spark, on_duckdb) in workloads.items():
        spark_answer, duckdb_answer = on_spark(), on_duckdb()
        if query == "sessions":
            same = len(spark_answer) == len(duckdb_answer) and int(spark_answer["events"].sum()) == int(
                duckdb_answer["events"].sum()
            )
            answer = f"{len(spark_answer)} active sessions"
        else:
            same = int(spark_answer["count"].sum()) == int(duckdb_answer["count"].sum()) and int(
                spark_answer["flag"].notna().sum()
            ) == int(duckdb_answer["flag"].notna().sum())
            answer = f"{len(spark_answer)} scored windows"
        if not same:
            raise SystemExit(f"{query}: Spark and DuckDB disagree on the {events:,}-event table")
        seconds = {"spark": bench_queries.timed(on_spark, runs), "duckdb": bench_queries.timed(on_duckdb, runs)}
        result[query] = {
            "answer": answer,
            "spark_seconds": summary(seconds["spark"]),
            "duckdb_seconds": summary(seconds["duckdb"]),
            "ratio_spark_over_duckdb": statistics.median(seconds["spark"]) / statistics.median(seconds["duckdb"]),
        }
        ratio = result[query]["ratio_spark_over_duckdb"]
        print(
            f"{events:>11,} events, {query:8s}: Spark {statistics.median(seconds['spark']):6.3f} s, DuckDB "
            f"{statistics.median(seconds['duckdb']):6.3f} s (Spark / DuckDB {ratio:.1f}×; "
            f"{answer}, engines agree)",
            flush=True,
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default="1000000", help="comma-separated table sizes")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per engine (after one warm-up)")
    args = parser.parse_args()

    facts = banner("session and anomaly queries, Spark and DuckDB", command_line())
    os.environ["ICESTREAM_WAREHOUSE"] = str(bench_queries.WAREHOUSE)
    os.environ.setdefault("ICESTREAM_SPARK_LOG_LEVEL", "ERROR")
    from icestream.config import load_settings
    from icestream.runtime.spark import get_spark

    spark = get_spark(load_settings(), app_name="icestream-bench-query-suite")
    sizes = [measure(spark, int(value), args.runs) for value in args.events.split(",")]
    write_results("query_suite", {"machine": facts, "command": command_line(), "sizes": sizes})


if __name__ == "__main__":
    main()
