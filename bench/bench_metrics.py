"""Benchmark: the real_time_metrics dashboard from the metrics table against the full query, at 1M and 10M events.

Reproduce with ``.venv/bin/python bench/bench_metrics.py`` (``--events 1000000 10000000``, ``--runs``),
and the ingest's cost of keeping the metrics with ``.venv/bin/python bench/bench_metrics.py --ingest``.
The events tables are ``bench/bench_queries.py``'s (the same warehouse under ``bench/results/tmp/``,
built once by ``load_payloads`` from the seeded generator and reused while the seed matches: about
15 minutes for 10M). Each gets its metrics table, built by ``refresh_metrics`` (a first build is
a rebuild from the full query; its seconds are reported) and compacted as ``icestream maintain``
would, the state a live table is in after its scheduled maintenance.

The dashboard (:mod:`icestream.queries.aggregate_dashboard`): every (minute, event type, device) group of the
newest hour with events, exact unique users and average duration, and the whole table rolled up by
event type and device. Four ways, each warmed up once, then ``--runs`` rounds, the order of the
four alternating round by round: Spark from the events table (the full query), Spark from the
metrics table, DuckDB from each. Every answer is checked equal to the others before anything is
timed. Medians and ratios are printed and written to ``bench/results/metrics.json``. Target on a
2-core machine: the dashboard from the metrics table in <= 1 s at 10M events, in Spark and in DuckDB.

``--ingest``: what the refresh costs the ingest. A 2-shard stream on a private emulator is filled
once with ``--records`` generated records; it is drained into a fresh table per drain, in batches of
about 2,000 records, without and with ``metrics=True``, in the order warm-up (not counted), plain,
metrics, metrics, plain. Reported: events per core-second of the process tree (Python, its JVM,
Spark's Python workers, from ``/proc``), wall seconds, and the median batch's refresh against its
events commit; written to ``bench/results/metrics_ingest.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_queries import WAREHOUSE, ensure_table
from common import banner, bench_session, command_line, fill_stream, new_table_settings, tree_cpu, write_results

TARGET_SECONDS = 1.0
WAYS = ("spark_full", "spark_metrics", "duckdb_full", "duckdb_metrics")


def dashboard_ways(connection, events_table, metrics_table, since) -> dict:
    """The four ways of asking the dashboard, by name (see the module docstring)."""
    from icestream.queries.aggregate_dashboard import duckdb_dashboard, spark_dashboard

    def duckdb_from(table, from_metrics: bool):
        return lambda: duckdb_dashboard(connection, table.inspect.metadata_location()[0], since, from_metrics)

    return {
        "spark_full": lambda: spark_dashboard(events_table, since, from_metrics=False),
        "spark_metrics": lambda: spark_dashboard(metrics_table, since, from_metrics=True),
        "duckdb_full": duckdb_from(events_table, False),
        "duckdb_metrics": duckdb_from(metrics_table, True),
    }


def drain(spark, stream_name: str, metrics: bool) -> dict:
    """Drain the stream into a fresh table, with or without the metrics; wall and CPU seconds, per batch phases."""
    from icestream import start_ingest
    from icestream.lake import setup_tables

    settings = new_table_settings(stream_name, prefix="mx")
    setup_tables(spark, settings)
    cpu0, began = sum(cpu for _, cpu in tree_cpu(os.getpid()).values()), time.perf_counter()
    query = start_ingest(spark, settings, available_now=True, trigger_seconds=0, metrics=metrics,
                         max_records_per_shard=1_000)  # fmt: skip
    query.await_termination()
    wall = time.perf_counter() - began
    cpu = sum(cpu for _, cpu in tree_cpu(os.getpid()).values()) - cpu0
    batches = list(query.recent_progress)
    written = sum(batch["written"] for batch in batches)
    return {
        "metrics": metrics, "seconds": round(wall, 2), "cpu_s": round(cpu, 2), "events": written,
        "batches": len(batches), "per_core_s": round(written / cpu, 1),
        "refresh_ms": statistics.median(batch["duration_ms"]["metrics"] for batch in batches),
        "write_events_ms": statistics.median(batch["duration_ms"]["write_events"] for batch in batches),
        "batch_ms": statistics.median(batch["duration_ms"]["total"] for batch in batches),
    }  # fmt: skip


def ingest_cost(records: int) -> int:
    """The ``--ingest`` part (see the module docstring)."""
    info = banner("metrics: the ingest with and without --metrics", command_line())
    with bench_session("metrics", shards=2) as (settings, spark):
        sent = fill_stream(settings, records, shards=2)
        print(f"stream: {sent:,} records on 2 shards", flush=True)
        drain(spark, settings.stream_name, metrics=True)  # warm-up: the JIT, the MERGE's classes
        drains = [drain(spark, settings.stream_name, metrics) for metrics in (False, True, True, False)]
    for one in drains:
        print(f"  {'metrics' if one['metrics'] else 'plain  '}: {one['events']:,} events in {one['batches']} "
              f"batches, {one['seconds']} s, {one['per_core_s']:,} events per core-second; median batch "
              f"{one['batch_ms']:.0f} ms (refresh {one['refresh_ms']:.0f} ms, events commit "
              f"{one['write_events_ms']:.0f} ms)")  # fmt: skip
    plain = statistics.median(one["per_core_s"] for one in drains if not one["metrics"])
    kept = statistics.median(one["per_core_s"] for one in drains if one["metrics"])
    print(f"events per core-second with the metrics / without: {kept / plain:.2f} ({kept:,.0f} vs {plain:,.0f})")
    write_results("metrics_ingest", {"machine": info, "records": sent, "drains": drains, "ratio": kept / plain})
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000], help="table sizes")
    parser.add_argument("--runs", type=int, default=5, help="timed rounds per size (after one warm-up)")
    parser.add_argument("--seed", type=int, default=2026, help="generator seed (bench_queries.py's)")
    parser.add_argument("--ingest", action="store_true", help="measure the ingest's cost of keeping the metrics")
    parser.add_argument("--records", type=int, default=20_000, help="with --ingest: records in the stream")
    args = parser.parse_args()
    if args.ingest:
        return ingest_cost(args.records)

    os.environ["ICESTREAM_WAREHOUSE"] = str(WAREHOUSE)
    from icestream.config import load_settings
    from icestream.lake import LakeTable
    from icestream.lake.continuous_aggregate import create_metrics_table, refresh_metrics
    from icestream.lake.routine import MaintenancePlan, run_maintenance
    from icestream.queries import duckdb_engine as duck
    from icestream.runtime.spark import get_spark

    info = banner("metrics", command_line())
    spark = None
    connection = duck.connect()
    results = {}
    for events in args.events:
        settings = load_settings(table=f"bench_{events}_s{args.seed}")
        spark = spark or get_spark(settings, app_name="icestream-bench-metrics")
        built, _ = ensure_table(spark, settings, events, args.seed)
        metrics = create_metrics_table(spark, settings.metrics_table_name, settings.table_name)
        refresh = refresh_metrics(spark, settings.table_name, metrics)
        maintained = MaintenancePlan.scheduled(settings.stream_name, steps=("compact",))
        run_maintenance(LakeTable(spark, metrics), maintained)
        events_table, metrics_table = LakeTable(spark, settings.table_name), LakeTable(spark, metrics)
        rows = spark.table(metrics).count()
        newest = spark.sql(f"SELECT max(minute) FROM {metrics}").first()[0]
        since = (newest - timedelta(minutes=59)).astimezone()
        print(f"{settings.table_name}: {built}; {metrics}: {rows:,} groups, {refresh.describe()}", flush=True)
        ways = dashboard_ways(connection, events_table, metrics_table, since)
        answers = {way: ways[way]() for way in WAYS}  # the warm-up, and the check
        for way in WAYS[1:]:
            assert answers[way].equals(answers["spark_full"]), f"{way} differs from the full query in Spark"
        seconds: dict[str, list[float]] = {way: [] for way in WAYS}
        for round_number in range(args.runs):
            order = WAYS if round_number % 2 == 0 else WAYS[::-1]
            for way in order:
                began = time.perf_counter()
                ways[way]()
                seconds[way].append(time.perf_counter() - began)
        medians = {way: statistics.median(values) for way, values in seconds.items()}
        for engine in ("spark", "duckdb"):
            full, kept = medians[f"{engine}_full"], medians[f"{engine}_metrics"]
            verdict = "met" if kept <= TARGET_SECONDS else "NOT met"
            print(f"  {events:>11,} events, {engine:6s}: full query {full:.3f} s, from the metrics {kept:.3f} s "
                  f"({full / kept:.0f}x faster); target <= {TARGET_SECONDS} s: {verdict}", flush=True)  # fmt: skip
        results[str(events)] = {
            "table": settings.table_name, "built": built, "metrics_groups": rows,
            "metrics_build": {"mode": refresh.mode, "seconds": round(refresh.seconds, 2)},
            "recent_groups": len(answers["spark_full"].recent), "rollup_rows": len(answers["spark_full"].rollup),
            "runs_seconds": seconds, "median_seconds": medians,
            "speedup": {engine: medians[f"{engine}_full"] / medians[f"{engine}_metrics"]
                        for engine in ("spark", "duckdb")},
        }  # fmt: skip
    path = write_results("metrics", {"machine": info, "target_seconds": TARGET_SECONDS, "sizes": results})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
