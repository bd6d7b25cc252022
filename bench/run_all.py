"""The benchmark suite: every benchmark in its own process, then plots, a summary table and JSON.

``make bench`` runs ``.venv/bin/python bench/run_all.py`` (default sizes, about 15 minutes on a
2-core machine); ``make bench BENCH_ARGS=--full`` runs the larger sizes (10M-event queries, the
whole freshness matrix, more runs; over an hour, mostly building the 10M table once).
``--only ingest,freshness`` runs some benchmarks; ``--plots-only`` redraws from the JSON files.

Each benchmark prints ``reproduce: <command>``, the machine (cores, memory, load, versions),
medians over several runs and ratios against a baseline measured in the same run, and writes
``bench/results/<name>.json``. This script then draws ``bench/results/*.png``, prints one table of
every item with its figure and target, and writes ``bench/results/summary.json`` and
``bench/results/summary.md`` (the table and the plot links, for docs/performance.md). Scratch warehouses and
logs go to ``bench/results/tmp/`` (gitignored).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import plots
from common import BENCH, RESULTS, SCRATCH, banner, command_line

SUITE_BUDGET_S = 15 * 60
PYTHON = sys.executable

# name -> (script, default arguments, --full arguments)
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "ingest": (
        "bench_ingest.py",
        ["--records", "60000", "--runs", "5"],
        ["--records", "60000", "--runs", "5", "--sustained-records", "200000"],
    ),
    "pipeline": (
        "bench_pipeline.py",
        ["--records", "60000", "--runs", "3", "--e2e-records", "30000"],
        ["--records", "200000", "--runs", "5", "--e2e-records", "60000"],
    ),
    "scaling": ("bench_scaling.py", ["--records", "20000", "--runs", "2"], ["--records", "100000", "--runs", "3"]),
    "freshness": ("bench_freshness.py", ["--seconds", "25"], ["--full", "--seconds", "45"]),
    "maintenance": ("bench_maintenance.py", ["--commits", "100"], ["--commits", "600", "--runs", "5"]),
    "queries": ("bench_queries.py", ["--runs", "3"], ["--runs", "5"]),
    "query_suite": ("bench_query_suite.py", ["--events", "1000000"], ["--events", "1000000,10000000", "--runs", "5"]),
    "growth": ("bench_growth.py", ["--checkpoints", "1,10,100"], ["--checkpoints", "1,10,100,500", "--runs", "5"]),
    "workbook": ("bench_workbook.py", [], ["--runs", "2", "--update-readme"]),
    "startup": ("bench_startup.py", ["--runs", "5"], ["--runs", "9"]),
}
QUERY_SIZES_FULL = (1_000_000, 10_000_000)


def run_benchmark(name: str, arguments: list[str], log: Path, timeout: float) -> dict[str, Any]:
    """Run one benchmark script, echoing its output (Spark's own log lines go only to the log file)."""
    script = BENCH / BENCHMARKS[name][0]
    command = [PYTHON, str(script.relative_to(BENCH.parent)), *arguments]  # run from the project folder
    shown = " ".join([".venv/bin/python", f"bench/{script.name}", *arguments])
    print(f"\n>>> {name}: {shown}", flush=True)
    began = time.monotonic()
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   cwd=BENCH.parent, env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
        assert process.stdout is not None
        try:
            for line in process.stdout:
                sink.write(line)
                if " WARN " not in line and not line.startswith(("\tat ", "Setting default log level")):
                    print("    " + line, end="", flush=True)
            returncode = process.wait(timeout=max(1.0, timeout - (time.monotonic() - began)))
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = -9
    seconds = time.monotonic() - began
    status = "ok" if returncode == 0 else f"failed (exit {returncode}; log {log.relative_to(BENCH.parent)})"
    print(f"<<< {name}: {status} in {seconds:.0f} s", flush=True)
    return {"command": shown, "seconds": seconds, "status": status}


def load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("met" if ok else "NOT met")


def summary_rows(timings: dict[str, dict[str, Any]], suite_seconds: float | None) -> list[dict[str, str]]:
    """One row per item of issue 7: what was measured, the figure, the target and whether it is met."""
    rows: list[dict[str, str]] = []

    def add(item: str, measure: str, figure: str, target: str = "—", ok: bool | None = None) -> None:
        rows.append({"item": item, "measure": measure, "figure": figure, "target": target, "status": _verdict(ok)})

    if ingest := load("ingest"):
        data = ingest["throughput"]
        ratio = data["ratio_dedupe_to_ceiling"]["median"]
        add("1 throughput", f"ingest / ceiling, {data['records']:,} records, {data['shards']} shards",
            f"{ratio:.2f} (dedupe on {data['ingest_dedupe_records_per_s']['median']:,.0f} rec/s, off "
            f"{data['ingest_no_dedupe_records_per_s']['median']:,.0f} "
            f"[{data['ratio_no_dedupe_to_ceiling']['median']:.2f}]; "
            f"ceiling {data['ceiling_records_per_s']['median']:,.0f} rec/s)", "≥ 0.7", ratio >= 0.7)  # fmt: skip
        if "ratio_dedupe_to_same_client_ceiling" in data:
            same = data["same_client_ceiling_records_per_s"]["median"]
            add("1 throughput", "ingest / ceiling read with the ingest's own boto3 client",
                f"{data['ratio_dedupe_to_same_client_ceiling']['median']:.2f} (ceiling {same:,.0f} rec/s)")  # fmt: skip
        if "read_ahead_gain" in data:
            ahead = data["ingest_dedupe_read_ahead_records_per_s"]["median"]
            add("1 throughput", "reading the next batch ahead (prefetch) / default, pairwise",
                f"{data['read_ahead_gain']['median']:.2f}× ({ahead:,.0f} rec/s)")  # fmt: skip
    if (long := (load("ingest") or {}).get("sustained")) is not None:
        ratio = long["ratio_dedupe_to_ceiling"]["median"]
        add("1 throughput", f"ingest / ceiling, longer drain of {long['records']:,} records",
            f"{ratio:.2f} ({long['ingest_dedupe_records_per_s']['median']:,.0f} rec/s; "
            f"ceiling {long['ceiling_records_per_s']['median']:,.0f} rec/s)", "≥ 0.7", ratio >= 0.7)  # fmt: skip
    if pipeline := load("pipeline"):
        data = pipeline["per_core"]
        ratio = data["ratio_pipeline_to_native"]["median"]
        add("17 pipeline", f"ingest pipeline / Spark's native JSON load, per core-second, {data['records']:,} records",
            f"{ratio:.2f} ({data['pipeline_records_per_core_second']['median']:,.0f} vs "
            f"{data['native_records_per_core_second']['median']:,.0f} rec/core-s)", "≥ 0.5", ratio >= 0.5)  # fmt: skip
        if (e2e := pipeline.get("end_to_end")) is not None:
            ratio = e2e["ratio_ingest_to_ceiling"]["median"]
            add("17 pipeline", f"ingest / bare GetRecords ceiling, {e2e['records']:,} records",
                f"{ratio:.2f} ({e2e['ingest_records_per_s']['median']:,.0f} vs "
                f"{e2e['ceiling_records_per_s']['median']:,.0f} rec/s)", "≥ 0.9", ratio >= 0.9)  # fmt: skip
    if scaling := load("scaling"):
        shards = scaling["shards"]
        add("2 scaling", f"throughput {shards[-1]['shards']} shards / {shards[0]['shards']} shard",
            f"{shards[-1]['ratio_to_first']:.2f}× ({shards[0]['records_per_s']['median']:,.0f} → "
            f"{shards[-1]['records_per_s']['median']:,.0f} rec/s)")  # fmt: skip
        caps = scaling["caps"]
        add("2 scaling", "throughput by max_records_per_shard (× cap 10,000)",
            ", ".join(f"{row['max_records_per_shard']:,}: {row['records_per_s']['median']:,.0f} rec/s "
                      f"({row['ratio_to_cap_10000']:.2f}×)" for row in caps))  # fmt: skip
        base = next((row for row in shards if row["shards"] == 4), shards[0])
        phases = {k: v for k, v in base["batch_phases_s_median"].items() if k in plots.PHASE_COLOURS}
        slowest = max(phases, key=phases.get)
        add("2 scaling", f"median batch by phase, {base['shards']} shards (s)",
            ", ".join(f"{k} {v:.2f}" for k, v in phases.items()) + f"; largest: {slowest}")  # fmt: skip
    if fresh := load("freshness"):
        for point in fresh["points"]:
            if "p95" not in point:
                continue
            # The target point and figure come from the benchmark's own result (bench_freshness.py).
            target_point = tuple(fresh.get("target_point", (500.0, 0.5)))
            target_p95 = fresh.get("target_p95_s", 1.0)
            is_target = (point["rate"], point["trigger_s"]) == target_point
            add("3 freshness", f"{point['rate']:,.0f} ev/s, {point['trigger_s']:g} s trigger: p50 / p95 / p99",
                f"{point['p50']:.2f} / {point['p95']:.2f} / {point['p99']:.2f} s ({point['rows']:,} rows)",
                f"p95 ≤ {target_p95:g} s" if is_target else "—",
                point["p95"] <= target_p95 if is_target else None)  # fmt: skip
    if maint := load("maintenance"):
        before, after, hour = maint["before"], maint["after"], maint["hour_extrapolated"]
        add("4 small files", f"after {maint['commits']} 1 s commits of {maint['events_per_commit']} events",
            f"{before['data_files']} files, avg {before['average_file_kib']:.0f} KiB; an hour (extrapolated): "
            f"~{hour['data_files']:,} files")  # fmt: skip
        add("4 small files", "after rewrite_data_files (+ rewrite_manifests)",
            f"{after['data_files']} file(s), avg {after['average_file_kib']:.0f} KiB; compaction "
            f"{maint['rewrite_data_files_seconds']:.1f} s (+ {maint['rewrite_manifests_seconds']:.1f} s manifests); "
            f"dashboard after/before Spark {maint['query_ratio_after_to_before']['spark']:.2f}, DuckDB "
            f"{maint['query_ratio_after_to_before']['duckdb']:.2f}")  # fmt: skip
    dashboards = [data for data in (load(f"queries_{size}") for size in QUERY_SIZES_FULL) if data] or [
        data for data in [load("queries")] if data
    ]
    for dashboard in dashboards:
        medians = dashboard["median_seconds"]
        targets = dashboard.get("targets_seconds", {})
        # Issue 5 sets the dashboard targets for 1,000,000 events; larger tables are reported without one.
        targeted = dashboard["table"]["events"] <= 1_100_000
        ok = all(medians[engine] <= targets.get(engine, float("inf")) for engine in medians) if targeted else None
        add("5 queries", f"dashboard, {dashboard['table']['events']:,} events: Spark / DuckDB",
            f"{medians['spark']:.2f} s / {medians['duckdb']:.3f} s ({dashboard['ratio_spark_over_duckdb']:.0f}×)",
            "Spark ≤ 3 s, DuckDB ≤ 1 s" if targeted else "— (targets are for 1M)", ok)  # fmt: skip
    if suite := load("query_suite"):
        for size in suite["sizes"]:
            for query in ("sessions", "anomaly"):
                data = size[query]
                add("5 queries", f"{query}, {size['events']:,} events: Spark / DuckDB",
                    f"{data['spark_seconds']['median']:.2f} s / {data['duckdb_seconds']['median']:.3f} s "
                    f"({data['ratio_spark_over_duckdb']:.0f}×)")  # fmt: skip
    if grow := load("growth"):
        first, last = grow["checkpoints"][0], grow["checkpoints"][-1]
        ratios = last["ratios_to_first"]
        grown = (
            f"{last['batches_appended']} vs {first['batches_appended']} batches appended ({last['snapshots']} vs "
            f"{first['snapshots']} snapshots, {last['data_files']} vs {first['data_files']} files, "
            f"{last['rows']:,} vs {first['rows']:,} rows)"
        )
        add("6 growth", f"ingest batch time, {grown}",
            f"×{ratios['ingest_batch_seconds']:.2f} ({first['ingest_batch_seconds']['median']:.2f} → "
            f"{last['ingest_batch_seconds']['median']:.2f} s per batch)", "≤ 2× (bounded)",
            ratios["ingest_batch_seconds"] <= 2.0)  # fmt: skip
        add("6 growth", "dashboard time over the whole table, same checkpoints",
            f"Spark ×{ratios['spark_dashboard_seconds']:.2f} ({first['spark_dashboard_seconds']['median']:.2f} → "
            f"{last['spark_dashboard_seconds']['median']:.2f} s), DuckDB ×{ratios['duckdb_dashboard_seconds']:.2f} "
            f"({first['duckdb_dashboard_seconds']['median']:.3f} → "
            f"{last['duckdb_dashboard_seconds']['median']:.3f} s)")  # fmt: skip
    if book := load("workbook"):
        total = book["total_seconds"]["median"]
        slowest = max(book["notebooks_seconds"], key=lambda name: book["notebooks_seconds"][name]["median"])
        add("7 workbook", "every notebook after set-up, one kernel",
            f"{total:.0f} s (slowest {slowest} {book['notebooks_seconds'][slowest]['median']:.0f} s)", "≤ 300 s",
            total <= 300 and not book.get("over_limit"))  # fmt: skip
    if suite_seconds is not None:
        add("suite", "default `make bench` wall time", f"{suite_seconds / 60:.1f} min", "< 15 min",
            suite_seconds < SUITE_BUDGET_S)  # fmt: skip
    return rows


def markdown(rows: list[dict[str, str]], machine: dict[str, Any], images: list[str]) -> str:
    """The table and the plot links for docs/performance.md."""
    lines = [
        f"Measured {machine.get('measured_at', '')} on {machine['cores']} cores, {machine['memory_gib']} GiB, "
        f"load average {machine['load_average']} at the start; Python {machine['python']}, {machine['java']}, "
        f"PySpark {machine['pyspark']}, Iceberg {machine['iceberg']}, moto {machine['moto']}, "
        f"DuckDB {machine['duckdb']}.",
        "",
        "| item | measure | figure (medians) | target | status |",
        "|---|---|---|---|---|",
        *(f"| {r['item']} | {r['measure']} | {r['figure']} | {r['target']} | {r['status']} |" for r in rows),
        "",
        *(f"![{Path(image).stem}](bench/results/{image})" for image in images),
        "",
    ]
    return "\n".join(lines)


def draw() -> list[str]:
    """Redraw every chart whose results exist; return the image names."""
    drawn = []
    for name, function in (("ingest", plots.ingest), ("scaling", plots.scaling), ("freshness", plots.freshness),
                           ("maintenance", plots.maintenance), ("growth", plots.growth),
                           ("workbook", plots.workbook)):  # fmt: skip
        if (data := load(name)) is not None:
            try:
                drawn.append(function(data, RESULTS / f"{name}.png").name)
            except (KeyError, TypeError, ValueError) as error:
                print(f"plot {name}: skipped ({type(error).__name__}: {error})")
    dashboards = [data for data in (load(f"queries_{size}") for size in QUERY_SIZES_FULL) if data] or [
        data for data in [load("queries")] if data
    ]
    if dashboards or load("query_suite"):
        drawn.append(plots.queries(dashboards, load("query_suite"), RESULTS / "queries.png").name)
    return drawn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the larger sizes (over an hour)")
    parser.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--plots-only", action="store_true", help="redraw and summarise the existing results")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one benchmark may take (x4 in --full)")
    args = parser.parse_args()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()] or list(BENCHMARKS)
    unknown = set(chosen) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")

    machine = banner("icestream benchmark suite" + (" (--full)" if args.full else ""), command_line())
    logs = SCRATCH / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    timings: dict[str, dict[str, Any]] = {}
    began = time.monotonic()
    if not args.plots_only:
        for name in chosen:
            _, default, full = BENCHMARKS[name]
            timeout = args.timeout * (4 if args.full else 1)
            if name == "queries" and args.full:
                for size in QUERY_SIZES_FULL:
                    timings[f"{name}_{size}"] = run_benchmark(
                        name, [*full, "--events", str(size)], logs / f"{name}_{size}.log", timeout
                    )
                    if (RESULTS / "queries.json").is_file():
                        shutil.copy(RESULTS / "queries.json", RESULTS / f"queries_{size}.json")
                continue
            timings[name] = run_benchmark(name, full if args.full else default, logs / f"{name}.log", timeout)
    suite_seconds = time.monotonic() - began if not args.plots_only and chosen == list(BENCHMARKS) else None
    earlier = load("summary")
    if args.plots_only and earlier:
        # Redrawing only: keep what the run that produced these results measured about itself.
        machine, timings = earlier["machine"], earlier["benchmarks"]
        suite_seconds, args.full = earlier["suite_seconds"], earlier["full"]
    images = draw()
    rows = summary_rows(timings, suite_seconds if not args.full else None)
    width = max(len(row["measure"]) for row in rows) if rows else 10
    print("\n== summary")
    for row in rows:
        print(
            f"{row['item']:13s} {row['measure']:{width}s}  {row['figure']}  [target {row['target']}: {row['status']}]"
        )
    for name, timing in timings.items():
        print(f"  {name:16s} {timing['seconds']:6.0f} s  {timing['status']}")
    if suite_seconds is not None:
        budget = SUITE_BUDGET_S / 60
        print(f"suite wall time: {suite_seconds:.0f} s ({suite_seconds / 60:.1f} min; default budget {budget:.0f} min)")
    payload = {"machine": machine, "command": command_line(), "full": args.full, "suite_seconds": suite_seconds,
               "benchmarks": timings, "rows": rows, "images": images}  # fmt: skip
    if not args.plots_only or earlier:
        if args.plots_only:
            payload["command"] = earlier["command"]
        (RESULTS / "summary.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
        (RESULTS / "summary.md").write_text(markdown(rows, machine, images))
    print(f"wrote bench/results/summary.json, summary.md and {len(images)} charts")
    return 0 if all(timing["status"] == "ok" for timing in timings.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
