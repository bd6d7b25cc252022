"""Every benchmark once, at small sizes: does it still run? A check, not a measurement.

``make test`` does not run the benchmarks (they take minutes each), so a change elsewhere can stop
one without anyone noticing: from 2026-11-26 to 11-28 ``bench_growth.py`` and
``bench_schema_evolution.py`` died at their first ingest (a trigger the ingest had started to
refuse), and ``bench_payloads.py`` failed its own check (a reader bug it had found), until a run
like this one showed it. Each script here runs in its own process, one after another, with sizes
that take seconds to a minute; their results go to ``bench/results/tmp/smoke/results/``
(``ICESTREAM_BENCH_RESULTS``), never over the committed ones, and each log to
``bench/results/tmp/smoke/<script>.log``. A script fails on a non-zero exit status (a crash, or a
check of its own). Timings at these sizes mean nothing and are not reported.

Run: ``make bench-smoke`` or ``.venv/bin/python bench/smoke.py [--only bench_ingest,bench_drain]``
(about 15 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BENCH, SCRATCH

# Each benchmark with the smallest arguments that still exercise what it measures. In this order:
# bench_metrics reuses the events table bench_queries builds.
RUNS: tuple[tuple[str, str], ...] = (
    ("bench_records_parser", "--records 2000 --runs 2"),
    ("bench_read_latency", "--shards 8 --records 100 --runs 1 --threads 1 4"),
    ("bench_payloads", "--events 2000 --runs 1"),
    ("bench_emulator", "--deep 20000 --batch-records 2000 --runs 2 --memory-records 40000"),
    ("bench_producer", "--runs 1 --seconds 2"),
    ("bench_anomaly", "--seeds 7 --step-minutes 230"),
    ("bench_write_properties", "--records 10000 --rounds 1 --warmup 0"),
    ("bench_parse_sides", "--records 5000 --rounds 1 --warmup 0"),
    ("bench_ingest", "--records 8000 --runs 1 --max-records-per-shard 1000"),
    ("bench_pipeline", "--records 10000 --runs 1 --warmup 0 --e2e-records 4000 --e2e-warmup 1 --e2e-runs 1"),
    ("bench_scaling", "--records 4000 --shards 1,4 --caps 500,10000 --runs 1"),
    ("bench_drain", "--records 5000 10000 --runs 1"),
    ("bench_routing", "--records 8000 --runs 1 --max-records-per-shard 1000"),
    ("bench_schema_evolution", "--batch-records 400 --reps 1 --before 2 --after 2 --warmup-batches 1"),
    ("bench_changes", "--changes 4000 --orders 500 --batch-records 1000 --reads 1"),
    ("bench_freshness", "--points 500:0.5,100:2 --seconds 8 --drain 10"),
    ("bench_batch_cost", "--warmup 5 --seconds 5 --only tip --only empty"),
    ("bench_kinesis_source", "--quick"),
    ("bench_peers", "--quick"),
    ("bench_maintenance", "--commits 10 --events-per-commit 200 --runs 1"),
    ("bench_growth", "--checkpoints 1,3 --events-per-batch 200 --measure-batches 1 --records-per-shard 100 --runs 1"),
    ("bench_queries", "--events 50000 --runs 1"),
    ("bench_query_suite", "--events 50000 --runs 1"),
    ("bench_metrics", "--events 50000 --runs 1"),
    ("bench_startup", "--runs 1"),
)
# Not run here, and why: each is covered elsewhere or needs what a smoke run does not have.
SKIPPED = {
    "bench_workbook": "runs every notebook (minutes); make test's notebook pass runs them all headless",
    "bench_cluster": "starts a standalone cluster and ships an environment; tests/cluster/ covers that path",
    "bench_checkouts": "compares two clones given as arguments; nothing to compare in one checkout",
}
TIMEOUT_SECONDS = 900


def run(script: str, arguments: str, folder: Path) -> tuple[int, float]:
    """Run one benchmark; its exit status (124: timed out) and wall seconds."""
    environment = {**os.environ, "ICESTREAM_BENCH_RESULTS": str(folder / "results")}
    began = time.monotonic()
    with open(folder / f"{script}.log", "w") as log:
        try:
            status = subprocess.run(
                [sys.executable, str(BENCH / f"{script}.py"), *arguments.split()], stdout=log, stderr=subprocess.STDOUT,
                env=environment, timeout=TIMEOUT_SECONDS, check=False,
            ).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            status = 124
    return status, time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated script names (without .py)")
    args = parser.parse_args()
    chosen = [name for name in args.only.split(",") if name]
    unknown = sorted(set(chosen) - {script for script, _ in RUNS})
    if unknown:
        raise SystemExit(f"not in this smoke run: {', '.join(unknown)}")
    folder = SCRATCH / "smoke"
    (folder / "results").mkdir(parents=True, exist_ok=True)
    failed = []
    for script, arguments in RUNS:
        if chosen and script not in chosen:
            continue
        status, seconds = run(script, arguments, folder)
        verdict = "ok" if status == 0 else f"FAILED (exit status {status})"
        print(f"{script:24s} {verdict:28s} {seconds:6.0f} s   {arguments}", flush=True)
        if status != 0:
            failed.append(script)
    for script in failed:
        print(f"\n--- {script}: the end of {folder / f'{script}.log'}")
        print("\n".join((folder / f"{script}.log").read_text(errors="replace").splitlines()[-25:]))
    print(f"\n{len(failed)} of the benchmarks run failed" if failed else "\nevery benchmark run ran")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
