"""Freshness under a live load (item 3): seconds from Kinesis arrival to visible in a query.

For each (rate, trigger) point a background producer sends live events for ``--seconds`` at that
rate into a fresh stream, while the ingest runs with that processing-time trigger into a fresh
table. After the producer ends, the ingest runs on until it has caught up (at most ``--drain``
seconds), so slow points are not flattered by leaving their backlog unread. Then every written
row's freshness is read back from the table: its batch's snapshot ``committed_at`` (the moment a
query can see the row) minus the record's Kinesis ``ApproximateArrivalTimestamp``
(``icestream.queries.report.freshness``). The session is warmed up first (JVM, Python workers,
boto3 clients) on a small stream; the first batch of each point (what arrived while the query
started) is left out. Reported: p50/p95/p99 over rows, the per-batch p95 spread, how many rows were measured
against how many the producer sent, and the cores the query's process tree used while the producer
sent (the driver, its JVM and Python workers; not the emulator or the producer: see
``bench_batch_cost.tree_cpu``). Target: p95 <= 1.0 s at 500 events/s with a 0.5 s trigger.

Default points: 500 ev/s with a 0.5 s trigger (the target), 500 ev/s with 1 s, 2,000 ev/s with 1 s
and 100 ev/s with 5 s; ``--curve`` runs the freshness/cost curve, 500 ev/s at triggers 0.25, 0.5, 1
and 5 s; ``--full`` runs the matrix 100/500/2,000 ev/s × 1 s/5 s.

Run: ``.venv/bin/python bench/bench_freshness.py`` (about 2.5 minutes), or ``make bench``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_batch_cost import tree_cpu
from common import (
    banner,
    bench_session,
    command_line,
    fill_stream,
    new_table_settings,
    run_ingest,
    summary,
    write_results,
)

DEFAULT_POINTS = "500:0.5,500:1,2000:1,100:5"
CURVE_POINTS = "500:0.25,500:0.5,500:1,500:5"
FULL_POINTS = "100:1,500:1,2000:1,100:5,500:5,2000:5"
TARGET_P95_S = 1.0
TARGET_POINT = (500.0, 0.5)


def freshness_point(spark: Any, rate: float, trigger: float, seconds: float, drain: float) -> dict[str, Any]:
    """One live run at ``rate`` events/s with a ``trigger``-second trigger."""
    from icestream import start_ingest
    from icestream.config import load_settings
    from icestream.kinesis.clients import ensure_stream
    from icestream.lake import setup_tables
    from icestream.producer.background import (
        background_producer_status,
        start_background_producer,
        stop_background_producer,
    )
    from icestream.queries.report import freshness, percentiles

    suffix = uuid.uuid4().hex[:8]
    settings = load_settings(stream_name=f"bench-fresh-{suffix}", table=f"fresh_{suffix}")
    ensure_stream(settings, shard_count=4)
    setup_tables(spark, settings)
    query = start_ingest(spark, settings, trigger_seconds=trigger, starting_position="trim_horizon")
    try:
        start_background_producer(
            settings, rate=rate, duration=seconds, bad_rate=0.0, duplicate_rate=0.0, late_rate=0.0
        )
        before, wall = tree_cpu(os.getpid()), time.monotonic()
        time.sleep(seconds)
        after, wall = tree_cpu(os.getpid()), time.monotonic() - wall
        deadline = time.monotonic() + drain
        status = background_producer_status(settings)
        while time.monotonic() < deadline:
            status = background_producer_status(settings)
            last = query.last_progress
            if not status.running and last is not None and last["caught_up"]:
                break
            time.sleep(0.5)
        time.sleep(trigger + 1)  # the batch that reads the last records commits
    finally:
        stop_background_producer(settings)
        query.stop()
    query.await_termination()
    status = background_producer_status(settings)  # its summary is written as it ends
    progress = list(query.recent_progress)
    steady = [batch for batch in progress if batch["batch_id"] >= 1]
    frame = freshness(spark, settings, steady)
    per_batch_p95 = frame.groupby("batch_id")["freshness_s"].quantile(0.95).tolist()
    sent = status.summary.producer.sent if status.summary else None
    return {
        "rate": rate,
        "trigger_s": trigger,
        "seconds": seconds,
        "rows": len(frame),
        "sent": sent,
        "written": sum(batch["written"] for batch in progress),
        "batches": len(steady),
        "caught_up": bool(progress and progress[-1]["caught_up"]),
        "batch_seconds": summary([batch["duration_ms"]["total"] / 1000 for batch in steady]) if steady else None,
        "batch_p95_s": summary(per_batch_p95) if per_batch_p95 else None,
        # Where a batch's time goes: the median of each phase over the steady batches (ingest.progress).
        "phase_median_ms": {
            phase: round(statistics.median(batch["duration_ms"][phase] for batch in steady), 1)
            for phase in (steady[0]["duration_ms"] if steady else {})
        },
        "read_on_driver": sum(batch.get("read_on") == "driver" for batch in steady),
        **percentiles(frame["freshness_s"]),
        "mean": float(frame["freshness_s"].mean()) if len(frame) else None,
        # A process that ended meanwhile is not counted (Spark reuses its Python workers).
        "cores": round(sum(cpu - before.get(pid, (kind, 0.0))[1] for pid, (kind, cpu) in after.items()) / wall, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default=DEFAULT_POINTS, help="comma-separated rate:trigger pairs")
    parser.add_argument("--curve", action="store_true", help=f"the freshness/cost curve: {CURVE_POINTS}")
    parser.add_argument("--full", action="store_true", help=f"the whole matrix: {FULL_POINTS}")
    parser.add_argument("--seconds", type=float, default=30.0, help="live production per point")
    parser.add_argument("--drain", type=float, default=20.0, help="at most this long to catch up afterwards")
    args = parser.parse_args()
    chosen = FULL_POINTS if args.full else CURVE_POINTS if args.curve else args.points
    points = [tuple(float(part) for part in pair.split(":")) for pair in chosen.split(",")]

    facts = banner("freshness: Kinesis arrival to visible in a query", command_line())
    runs = []
    with bench_session("freshness") as (settings, spark):
        fill_stream(settings, 2_000, 4)
        run_ingest(spark, new_table_settings(settings.stream_name), dedupe=True, max_records_per_shard=250)  # warm-up
        for rate, trigger in points:
            run = freshness_point(spark, rate, trigger, args.seconds, args.drain)
            runs.append(run)
            shown = ", ".join(f"{key} {run[key]:.2f} s" for key in ("p50", "p95", "p99") if key in run)
            print(
                f"{rate:6.0f} ev/s, trigger {trigger:g} s: {shown}, {run['cores']:.2f} cores  ({run['rows']} rows "
                f"measured of {run['sent']} sent, {run['written']} written, {run['batches']} batches, "
                f"caught up: {run['caught_up']})",
                flush=True,
            )
    target = next((run for run in runs if (run["rate"], run["trigger_s"]) == TARGET_POINT), None)
    if target and "p95" in target:
        verdict = "met" if target["p95"] <= TARGET_P95_S and target["written"] == target["sent"] else "NOT met"
        print(
            f"target p95 <= {TARGET_P95_S} s at 500 ev/s, 0.5 s trigger, rows written = rows sent: "
            f"{target['p95']:.2f} s, {target['written']} of {target['sent']}, {verdict}"
        )
    write_results(
        "freshness",
        {
            "machine": facts,
            "command": command_line(),
            "target_p95_s": TARGET_P95_S,
            "target_point": list(TARGET_POINT),
            "points": runs,
            "median_p95_s": statistics.median(p95s) if (p95s := [run["p95"] for run in runs if "p95" in run]) else None,
        },
    )


if __name__ == "__main__":
    main()
