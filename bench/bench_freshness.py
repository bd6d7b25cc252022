"""Freshness under a live load (item 3): seconds from Kinesis arrival to visible in a query.

For each (rate, trigger) point a background producer sends live events for ``--seconds`` at that
rate into a fresh stream, while the ingest runs with that processing-time trigger into a fresh
table. After the producer ends, the ingest runs on until it has caught up (at most ``--drain``
seconds), so slow points are not flattered by leaving their backlog unread. Then every written
row's freshness is read back from the table: its batch's snapshot ``committed_at`` (the moment a
query can see the row) minus the record's Kinesis ``ApproximateArrivalTimestamp``
(``icestream.queries.report.freshness``). The session is warmed up first (JVM, Python workers,
boto3 clients) on a small stream; the first batch of each point (what arrived while the query
started) is left out. Reported: p50/p95/p99 over rows, the per-batch p95 spread, and how many rows were measured
against how many the producer sent. Target: p95 <= 3 s at 500 events/s with a 1 s trigger.

Default points: 500 ev/s with a 1 s trigger (the target), 2,000 ev/s with 1 s and 100 ev/s with
5 s; ``--full`` runs the whole matrix 100/500/2,000 ev/s × 1 s/5 s.

Run: ``.venv/bin/python bench/bench_freshness.py`` (about 2.5 minutes), or ``make bench``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

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

DEFAULT_POINTS = "500:1,2000:1,100:5"
FULL_POINTS = "100:1,500:1,2000:1,100:5,500:5,2000:5"
TARGET_P95_S = 3.0


def freshness_point(spark: Any, rate: float, trigger: float, seconds: float, drain: float) -> dict[str, Any]:
    """One live run at ``rate`` events/s with a ``trigger``-second trigger."""
    from icestream.config import load_settings
    from icestream.ingest import start_ingest
    from icestream.lake.ddl import setup_tables
    from icestream.producer.background import (
        background_producer_status,
        start_background_producer,
        stop_background_producer,
    )
    from icestream.queries.report import freshness, percentiles
    from icestream.stream.clients import ensure_stream

    suffix = uuid.uuid4().hex[:8]
    settings = load_settings(stream_name=f"bench-fresh-{suffix}", table=f"fresh_{suffix}")
    ensure_stream(settings, shard_count=4)
    setup_tables(spark, settings)
    query = start_ingest(spark, settings, trigger_seconds=trigger, starting_position="trim_horizon")
    try:
        start_background_producer(
            settings, rate=rate, duration=seconds, bad_rate=0.0, duplicate_rate=0.0, late_rate=0.0
        )
        time.sleep(seconds)
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
        **percentiles(frame["freshness_s"]),
        "mean": float(frame["freshness_s"].mean()) if len(frame) else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default=DEFAULT_POINTS, help="comma-separated rate:trigger pairs")
    parser.add_argument("--full", action="store_true", help=f"the whole matrix: {FULL_POINTS}")
    parser.add_argument("--seconds", type=float, default=30.0, help="live production per point")
    parser.add_argument("--drain", type=float, default=20.0, help="at most this long to catch up afterwards")
    args = parser.parse_args()
    points = [tuple(float(part) for part in pair.split(":")) for pair in (FULL_POINTS if args.full else args.points)
              .split(",")]  # fmt: skip

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
                f"{rate:6.0f} ev/s, trigger {trigger:.0f} s: {shown}  ({run['rows']} rows measured of "
                f"{run['sent']} sent, {run['batches']} batches, caught up: {run['caught_up']})",
                flush=True,
            )
    target = next((run for run in runs if run["rate"] == 500 and run["trigger_s"] == 1), None)
    if target and "p95" in target:
        verdict = "met" if target["p95"] <= TARGET_P95_S else "NOT met"
        print(f"target p95 <= {TARGET_P95_S} s at 500 ev/s, 1 s trigger: {target['p95']:.2f} s, {verdict}")
        spread = [run["p95"] / target["p95"] for run in runs if "p95" in run]
        print("p95 relative to 500 ev/s @ 1 s: " + ", ".join(f"{value:.2f}" for value in spread))
    write_results(
        "freshness",
        {
            "machine": facts,
            "command": command_line(),
            "target_p95_s": TARGET_P95_S,
            "points": runs,
            "median_p95_s": statistics.median(p95s) if (p95s := [run["p95"] for run in runs if "p95" in run]) else None,
        },
    )


if __name__ == "__main__":
    main()
