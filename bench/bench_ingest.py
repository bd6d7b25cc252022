"""Ingest throughput against the emulator's ceiling, and freshness under a live load.

Throughput: one stream is filled once; then, in the same run and against the same stream, a bare
boto3 GetRecords loop drains it (the emulator's ceiling: nothing can read faster) and the ingest
query drains it into a fresh table with ``available_now``, with dedupe on and off. Reported:
medians over ``--runs`` and the ratio ingest / ceiling (target >= 0.7).

Freshness: a background producer sends live events at ``--rates`` while the ingest runs with each
``--triggers`` interval; afterwards every written row's freshness (snapshot commit time minus
Kinesis arrival) is read back from the table. Reported: p50/p95/p99 (target p95 <= 3 s at 500
events/s with a 1 s trigger).

Run: ``.venv/bin/python bench/bench_ingest.py`` (about 5 minutes), or ``make bench``.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, command_line, private_environment, summary, timed, write_results


def fill_stream(settings: Any, records: int, shards: int) -> int:
    from icestream.clients import ensure_stream
    from icestream.events import backfill_config, generate
    from icestream.producer import produce

    ensure_stream(settings, shard_count=shards)
    generated, _ = generate(backfill_config(hours=3, count=records, seed=7))
    sent = produce(settings, generated, progress=False)
    return sent.sent


def raw_drain(settings: Any) -> int:
    """Read every shard to its end with a bare GetRecords loop: the ceiling."""
    from icestream.clients import kinesis_client, list_shards

    client = kinesis_client(settings)
    total = 0
    for shard in list_shards(client, settings.stream_name):
        iterator = client.get_shard_iterator(
            StreamName=settings.stream_name, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            answer = client.get_records(ShardIterator=iterator, Limit=10_000)
            total += len(answer["Records"])
            if not answer["Records"] and answer.get("MillisBehindLatest", 0) == 0:
                break
            iterator = answer.get("NextShardIterator")
    return total


def run_ingest(spark: Any, settings: Any, dedupe: bool, max_records: int) -> dict[str, Any]:
    from icestream.config import load_settings
    from icestream.ingest import start_ingest
    from icestream.tables import setup_tables

    target = load_settings(stream_name=settings.stream_name, table=f"bench_{uuid.uuid4().hex[:8]}")
    setup_tables(spark, target)
    began = time.perf_counter()
    query = start_ingest(
        spark, target, available_now=True, trigger_seconds=0, dedupe=dedupe, max_records_per_shard=max_records
    )
    query.await_termination()
    seconds = time.perf_counter() - began
    progress = list(query.recent_progress)
    read = sum(batch["num_input_rows"] for batch in progress)
    phases: dict[str, float] = {}
    for batch in progress:
        for phase, ms in batch["duration_ms"].items():
            phases[phase] = phases.get(phase, 0.0) + ms / 1000
    return {"seconds": seconds, "read": read, "batches": len(progress), "phases_s": phases, "rate": read / seconds}


def throughput(spark: Any, settings: Any, args: argparse.Namespace) -> dict[str, Any]:
    sent = fill_stream(settings, args.records, args.shards)
    print(f"stream {settings.stream_name}: {sent} records in {args.shards} shards")
    run_ingest(spark, settings, True, args.max_records_per_shard)  # warm-up: JVM, Python workers, caches
    ceiling, with_dedupe, without_dedupe = [], [], []
    for number in range(args.runs):
        seconds, count = timed(lambda: raw_drain(settings))
        ceiling.append(count / seconds)
        with_dedupe.append(run_ingest(spark, settings, True, args.max_records_per_shard))
        without_dedupe.append(run_ingest(spark, settings, False, args.max_records_per_shard))
        dedupe_rate, plain_rate = with_dedupe[-1]["rate"], without_dedupe[-1]["rate"]
        print(
            f"run {number + 1}: ceiling {ceiling[-1]:8.0f} rec/s   ingest+dedupe {dedupe_rate:8.0f} rec/s   "
            f"ingest {plain_rate:8.0f} rec/s   ({with_dedupe[-1]['batches']} batches)"
        )
    ratios = [run["rate"] / raw for run, raw in zip(with_dedupe, ceiling, strict=True)]
    result = {
        "records": sent,
        "shards": args.shards,
        "max_records_per_shard": args.max_records_per_shard,
        "ceiling_records_per_s": summary(ceiling),
        "ingest_dedupe_records_per_s": summary([run["rate"] for run in with_dedupe]),
        "ingest_no_dedupe_records_per_s": summary([run["rate"] for run in without_dedupe]),
        "ratio_dedupe_to_ceiling": summary(ratios),
        "phases_s_median_run": with_dedupe[
            sorted(range(len(with_dedupe)), key=lambda i: with_dedupe[i]["rate"])[len(with_dedupe) // 2]
        ]["phases_s"],
    }
    medians = {key: value["median"] for key, value in result.items() if isinstance(value, dict) and "median" in value}
    print(
        f"throughput: ceiling {medians['ceiling_records_per_s']:.0f} rec/s, ingest with dedupe "
        f"{medians['ingest_dedupe_records_per_s']:.0f}, without {medians['ingest_no_dedupe_records_per_s']:.0f}; "
        f"ratio {medians['ratio_dedupe_to_ceiling']:.2f} (target >= 0.7)"
    )
    print("phases (s, median run): " + ", ".join(f"{k} {v:.2f}" for k, v in result["phases_s_median_run"].items()))
    return result


def freshness_run(spark: Any, base: Any, rate: float, trigger: float, seconds: float) -> dict[str, Any]:
    from icestream.clients import ensure_stream
    from icestream.config import load_settings
    from icestream.ingest import start_ingest
    from icestream.ingest.report import freshness, percentiles
    from icestream.producer import start_background_producer, stop_background_producer
    from icestream.tables import setup_tables

    suffix = uuid.uuid4().hex[:8]
    settings = load_settings(stream_name=f"bench-fresh-{suffix}", table=f"fresh_{suffix}")
    ensure_stream(settings, shard_count=base.shard_count)
    setup_tables(spark, settings)
    query = start_ingest(spark, settings, trigger_seconds=trigger, starting_position="trim_horizon")
    start_background_producer(settings, rate=rate, duration=seconds, bad_rate=0.0, duplicate_rate=0.0, late_rate=0.0)
    time.sleep(seconds + 3 * trigger + 2)
    stop_background_producer(settings)
    query.stop()
    query.await_termination()
    progress = list(query.recent_progress)
    # The first batches pay for warm-up and any backlog at start; measure the steady state.
    steady = [batch for batch in progress if batch["batch_id"] >= 2]
    values = freshness(spark, settings, steady)["freshness_s"]
    return {"rate": rate, "trigger_s": trigger, "rows": len(values), **percentiles(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000, help="records in the throughput stream")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-records-per-shard", type=int, default=10_000)
    parser.add_argument("--rates", default="500", help="comma-separated events/s for freshness")
    parser.add_argument("--triggers", default="1", help="comma-separated trigger seconds for freshness")
    parser.add_argument("--freshness-seconds", type=float, default=45.0, help="live production per freshness run")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-freshness", action="store_true")
    args = parser.parse_args()

    facts = banner("ingest throughput and freshness", command_line())
    private_environment("ingest")
    from icestream.config import load_settings
    from icestream.emulator import Emulator
    from icestream.spark import get_spark

    settings = load_settings(stream_name=f"bench-{uuid.uuid4().hex[:8]}", shard_count=args.shards)
    emulator = Emulator(settings.path("run_dir"))
    emulator.start()
    try:
        spark = get_spark(settings, app_name="icestream-bench")
        results: dict[str, Any] = {"machine": facts, "command": command_line()}
        if not args.skip_throughput:
            results["throughput"] = throughput(spark, settings, args)
        if not args.skip_freshness:
            runs = []
            for rate in (float(value) for value in args.rates.split(",")):
                for trigger in (float(value) for value in args.triggers.split(",")):
                    run = freshness_run(spark, settings, rate, trigger, args.freshness_seconds)
                    runs.append(run)
                    shown = ", ".join(f"{key} {run[key]:.2f} s" for key in ("p50", "p95", "p99") if key in run)
                    print(f"freshness at {rate:.0f} ev/s, trigger {trigger:.1f} s: {shown} ({run['rows']} rows)")
            results["freshness"] = runs
        write_results("ingest", results)
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
