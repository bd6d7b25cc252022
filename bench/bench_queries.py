"""Benchmark: the KPI dashboard over 1,000,000 events, Spark (local) and DuckDB side by side.

Reproduce with ``.venv/bin/python bench/bench_queries.py`` (``--events``, ``--runs``, ``--rebuild``).
The table is built once with ``icestream.file_load.bulk.load_payloads`` from the seeded generator
(about 10 s per 100,000 events) in a warehouse under ``bench/results/tmp/`` (gitignored) and reused
while the event count and seed match. Both engines read the same snapshot; each is warmed up once,
then timed ``--runs`` times; the medians and their ratio are printed and written to
``bench/results/queries.json``. Targets on a 2-core machine: Spark <= 3 s, DuckDB <= 1 s, warm.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = Path(os.environ.get("ICESTREAM_BENCH_RESULTS") or HERE / "results")  # as common.RESULTS
WAREHOUSE = HERE / "results" / "tmp" / "bench-warehouse"
TARGETS_S = {"spark": 3.0, "duckdb": 1.0}


def machine() -> dict[str, object]:
    """Cores, memory and versions of what ran the benchmark."""
    import duckdb
    import pyspark

    memory_kib = next(
        (
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024**2, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "iceberg": "1.10.2",
        "duckdb": duckdb.__version__,
    }


def timed(function, runs: int) -> list[float]:
    """Seconds of each of ``runs`` calls, after one warm-up call."""
    function()
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - start)
    return seconds


def ensure_table(spark, settings, events: int, seed: int, rebuild: bool = False) -> tuple[str, float | None]:
    """The benchmark's events table of ``events`` generated events: built unless an earlier run left it.

    Returns:
        How it came to be (one line) and the load's seconds (None when reused).
    """
    from icestream.file_load.bulk import load_payloads
    from icestream.lake import ddl
    from icestream.synthetic.generator import backfill_config, generate

    name = settings.table_name
    if rebuild:
        spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
    ddl.create_namespace(spark, settings)
    ddl.create_events_table(spark, settings)
    if not spark.table(name).isEmpty():
        return "reused from an earlier run", None
    start = time.perf_counter()
    # 24 h of history with no bad records: every generated record becomes a row.
    config = backfill_config(hours=24, count=events, end=datetime(2026, 11, 21, tzinfo=UTC),
                             seed=seed, bad_rate=0.0, duplicate_rate=0.0)  # fmt: skip
    records, _ = generate(config)
    counts = load_payloads(spark, name, ((r.data, r.partition_key) for r in records), chunk_rows=250_000)
    load_seconds = round(time.perf_counter() - start, 1)
    return f"built now: {counts['written']:,} events by load_payloads in {load_seconds} s", load_seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="clean events in the table")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per engine (after one warm-up)")
    parser.add_argument("--seed", type=int, default=2026, help="generator seed")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached table")
    args = parser.parse_args()

    os.environ["ICESTREAM_WAREHOUSE"] = str(WAREHOUSE)
    from icestream.config import load_settings
    from icestream.lake import LakeTable
    from icestream.queries import duckdb_engine as duck
    from icestream.queries import realtime
    from icestream.runtime.spark import get_spark

    command = " ".join(["python", "bench/bench_queries.py", *map(shlex.quote, sys.argv[1:])])
    print(f"reproduce: {command}")
    settings = load_settings(table=f"bench_{args.events}_s{args.seed}")
    spark = get_spark(settings, app_name="icestream-bench")
    name = settings.table_name
    built, load_seconds = ensure_table(spark, settings, args.events, args.seed, args.rebuild)
    table = LakeTable(spark, name)
    location, snapshot_id = table.inspect.metadata_location()
    files = len(table.inspect.data_files())
    print(f"table: {name} in {WAREHOUSE} ({files} data files, snapshot {snapshot_id}); {built}")
    print(f"table built with: icestream.file_load.bulk.load_payloads of backfill_config(hours=24, count={args.events}, "
          f"seed={args.seed}, bad_rate=0, duplicate_rate=0)")  # fmt: skip

    connection = duck.connect()
    results = {}
    spark_dashboard = realtime.kpi_dashboard(table, snapshot_id=snapshot_id)
    duckdb_dashboard = duck.kpi_dashboard(connection, location)
    events = int(spark_dashboard.totals.iloc[0]["events"])
    assert events == int(duckdb_dashboard.totals.iloc[0]["events"]), "the engines disagree"
    results["spark"] = timed(lambda: realtime.kpi_dashboard(table, snapshot_id=snapshot_id), args.runs)
    results["duckdb"] = timed(lambda: duck.kpi_dashboard(connection, location), args.runs)

    info = machine()
    print(f"machine: {info}")
    medians = {engine: statistics.median(seconds) for engine, seconds in results.items()}
    for engine, seconds in results.items():
        verdict = "within" if medians[engine] <= TARGETS_S[engine] else "ABOVE"
        print(
            f"{engine:7s} median {medians[engine]:.3f} s over {len(seconds)} warm runs "
            f"(min {min(seconds):.3f}, max {max(seconds):.3f}); target <= {TARGETS_S[engine]} s: {verdict}"
        )
    ratio = medians["spark"] / medians["duckdb"]
    print(f"ratio Spark / DuckDB: {ratio:.1f}x  ({events:,} events, dashboard over the whole table)")

    RESULTS.mkdir(parents=True, exist_ok=True)
    output = {
        "command": command,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": info,
        "table": {"name": name, "events": events, "data_files": files, "built": built, "load_seconds": load_seconds},
        "query": "KPI dashboard (icestream.queries: realtime.kpi_dashboard, duckdb_engine.kpi_dashboard), whole table",
        "runs_seconds": results,
        "median_seconds": medians,
        "targets_seconds": TARGETS_S,
        "ratio_spark_over_duckdb": ratio,
    }
    (RESULTS / "queries.json").write_text(json.dumps(output, indent=2) + "\n")
    print(f"wrote {RESULTS / 'queries.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
