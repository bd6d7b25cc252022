"""CPU per batch at the stream's tip, against Spark's own micro-batch stream into Iceberg.

Three always-on queries, one after another in one SparkSession, each with a 1 s processing-time
trigger, each warmed up and then measured over the same window:

- **spark**: Spark's own micro-batch query, the ``rate`` source at ``--rate`` rows/s written by
  Iceberg's streaming sink into a table of the same catalog (no Kinesis): the baseline;
- **tip**: the icestream ingest of a 4-shard stream that a background producer feeds at ``--rate``
  events/s (``starting_position='latest'``: it reads only what arrives);
- **tip-spark**: the same as **tip**, but every batch read by a Spark job (``tip_on_driver=False``,
  the ingest before it read batches at the tip on the driver): the change's baseline, in the same run;
- **empty**: the icestream ingest of a 4-shard stream nobody writes to.

CPU is the busy time of the process tree that runs the queries: this process (the Spark driver's
Python side), its JVM and the JVM's Python workers, read from ``/proc/<pid>/stat``; the emulator
and the producer (separate processes) are not counted. Reported: cores used (busy CPU seconds per
wall second), batches, CPU seconds per batch, and the ratios to Spark's own. Targets:
tip <= 1.5x Spark's own cores, empty <= 0.05 cores.

The warm-up is long on purpose: an always-on query's JVM keeps compiling for minutes (a batch a
second runs each of its many code paths once, so counters cross the JIT's thresholds slowly), and
the steady state is what an always-on ingest costs. ``--warmup 20`` shows the first minute.

Run: ``.venv/bin/python bench/bench_batch_cost.py`` (about 9 minutes), ``--seconds 60`` for longer windows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import SCRATCH, banner, bench_session, command_line, tree_cpu, write_results

TARGET_RATIO = 1.5
TARGET_EMPTY_CORES = 0.05


def measure(batches: Callable[[], int], seconds: float) -> dict[str, Any]:
    """Cores and CPU per batch of this process tree over ``seconds`` of wall time, and by process kind."""
    root = os.getpid()
    before, wall0, batches0 = tree_cpu(root), time.monotonic(), batches()
    time.sleep(seconds)
    after, wall1, batches1 = tree_cpu(root), time.monotonic(), batches()
    wall = wall1 - wall0
    by_kind: dict[str, float] = {}
    for pid, (kind, cpu) in after.items():  # a process that ended meanwhile is not counted (workers are reused)
        by_kind[kind] = by_kind.get(kind, 0.0) + cpu - before.get(pid, (kind, 0.0))[1]
    busy = sum(by_kind.values())
    count = batches1 - batches0
    return {
        "seconds": round(wall, 1),
        "cores": round(busy / wall, 3),
        "batches": count,
        "cpu_s_per_batch": round(busy / count, 3) if count else None,
        "cores_by_process": {kind: round(value / wall, 3) for kind, value in sorted(by_kind.items())},
    }


def spark_own(spark: Any, rate: float, warmup: float, seconds: float) -> dict:
    """Spark's rate source into an Iceberg table through Iceberg's streaming sink, 1 s trigger."""
    from icestream.config import load_settings

    name = f"{load_settings().catalog}.{load_settings().namespace}.rate_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE {name} (timestamp TIMESTAMP, value BIGINT) USING iceberg")
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", int(rate)).load()
        .writeStream.format("iceberg").outputMode("append").trigger(processingTime="1 second")
        .option("checkpointLocation", str(SCRATCH / "batch_cost" / f"checkpoint-{uuid.uuid4().hex[:8]}"))
        .toTable(name)
    )  # fmt: skip
    try:
        time.sleep(warmup)
        figures = measure(lambda: (query.lastProgress or {"batchId": -1})["batchId"], seconds)
        figures["rows"] = spark.table(name).count()
    finally:
        query.stop()
    return figures


def icestream_query(spark: Any, rate: float, warmup: float, seconds: float, **options: Any) -> dict:
    """The ingest at a stream's tip: fed at ``rate`` events/s by a background producer (0: nobody writes)."""
    from icestream import start_ingest
    from icestream.config import load_settings
    from icestream.kinesis.clients import ensure_stream
    from icestream.lake import setup_tables
    from icestream.producer.background import start_background_producer, stop_background_producer

    suffix = uuid.uuid4().hex[:8]
    settings = load_settings(stream_name=f"bench-cost-{suffix}", table=f"cost_{suffix}")
    ensure_stream(settings, shard_count=4)
    setup_tables(spark, settings)
    if rate:
        start_background_producer(
            settings, rate=rate, duration=warmup + seconds + 30, bad_rate=0.0, duplicate_rate=0.0, late_rate=0.0
        )
    query = start_ingest(spark, settings, trigger_seconds=1.0, starting_position="latest", **options)
    try:
        time.sleep(warmup)
        figures = measure(lambda: (query.last_progress or {"batch_id": -1})["batch_id"], seconds)
    finally:
        query.stop()
        stop_background_producer(settings)
    query.await_termination()
    figures["rows"] = spark.table(settings.table_name).count()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="events (rows) per second")
    parser.add_argument("--warmup", type=float, default=150.0, help="seconds each query runs before measuring")
    parser.add_argument("--seconds", type=float, default=40.0, help="seconds measured per query")
    parser.add_argument("--only", choices=("spark", "tip", "tip-spark", "empty"), action="append",
                        help="run only these, in this order")  # fmt: skip
    args = parser.parse_args()
    cases = args.only or ["spark", "tip", "empty"]

    facts = banner("CPU per batch at the tip: icestream against Spark's own micro-batch into Iceberg", command_line())
    results: dict[str, Any] = {}
    with bench_session("batch_cost") as (_settings, spark):
        for case in cases:
            if case == "spark":
                figures = spark_own(spark, args.rate, args.warmup, args.seconds)
            else:
                rate = 0 if case == "empty" else args.rate
                figures = icestream_query(spark, rate, args.warmup, args.seconds, tip_on_driver=case != "tip-spark")
            results[case] = figures
            print(f"{case:6s} " + ", ".join(f"{key} {value}" for key, value in figures.items()), flush=True)
    if "spark" in results and "tip" in results:
        ratio = results["tip"]["cores"] / results["spark"]["cores"]
        verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
        print(f"tip / Spark's own, cores: {ratio:.2f} (target <= {TARGET_RATIO}: {verdict})")
        results["ratio_tip_to_spark"] = round(ratio, 2)
    if "tip" in results and "tip-spark" in results:
        ratio = results["tip"]["cpu_s_per_batch"] / results["tip-spark"]["cpu_s_per_batch"]
        print(f"tip read on the driver / by a Spark job, CPU per batch: {ratio:.2f}")
        results["ratio_driver_to_spark_read"] = round(ratio, 2)
    if "empty" in results:
        verdict = "met" if results["empty"]["cores"] <= TARGET_EMPTY_CORES else "NOT met"
        print(f"empty stream: {results['empty']['cores']:.3f} cores (target <= {TARGET_EMPTY_CORES}: {verdict})")
    write_results("batch_cost", {"machine": facts, "command": command_line(), "rate": args.rate, **results})


if __name__ == "__main__":
    main()
