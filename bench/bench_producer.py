"""The producer's rate: is ``--rate R`` met for R up to 80 % of the emulator's raw PutRecords rate?

For each mode (live, paced by event time; backfill, capped by a rate limit) and ``--runs`` times:
measure the raw rate of a bare PutRecords loop (500 records per call, one client), run the producer
at 0.8 of it for ``--seconds``, measure the raw rate again, and report the achieved rate (the run
summary's records sent over its wall time) over the target. A run during which the raw rate moved by
more than 10 % (other processes on the cores) is reported as noisy. Target: within 5 %.
The producer needs about 1.4x the CPU per record of the bare loop, so on a busy 2-core machine it
falls behind first.

Run: ``.venv/bin/python bench/bench_producer.py`` (about 2 minutes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, bench_session, command_line, write_results

from icestream.kinesis.clients import kinesis_client
from icestream.producer.put import producer_client
from icestream.producer.run import run_production
from icestream.synthetic.generator import EventGenerator, backfill_config, generate, live_config


def raw_put_rate(stream: Any, seconds: float = 2.0) -> float:
    """Records per second of a bare PutRecords loop: 500 generated records per call, one client."""
    client = kinesis_client(stream)
    sample, _ = generate(live_config(1000.0, records=500, seed=8))
    entries = [{"Data": record.data, "PartitionKey": record.partition_key} for record in sample]
    started, calls = time.perf_counter(), 0
    while (elapsed := time.perf_counter() - started) < seconds:
        client.put_records(StreamName=stream.stream_name, Records=entries)
        calls += 1
    return calls * len(entries) / elapsed


def run_at_rate(stream: Any, mode: str, rate: float, seconds: float) -> Any:
    """Send ``rate x seconds`` records at ``rate``: live (paced by event time) or a backfill (a rate cap)."""
    client = producer_client(stream)  # opened first: a live window starts when its config is made
    count = int(rate * seconds)
    if mode == "live":
        generator = EventGenerator(live_config(rate, records=count, seed=7))
        options: dict[str, Any] = {"pace": True}
    else:
        generator = EventGenerator(backfill_config(hours=1, records=count, seed=7))
        options = {"rate_limit": rate}
    run = run_production(stream, generator, mode=mode, generator=generator, client=client, progress=False, **options)
    if run.producer.sent != count:
        raise RuntimeError(f"sent {run.producer.sent} of {count}")
    return run.producer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    facts = banner("producer rate", command_line())
    results: dict[str, list[dict[str, float]]] = {"live": [], "backfill": []}
    with bench_session("producer", shards=4, spark=False) as (settings, _):
        from icestream.kinesis.clients import ensure_stream

        ensure_stream(settings, shard_count=4)
        for _ in range(args.runs):
            for mode in results:
                before = raw_put_rate(settings)
                target = 0.8 * before
                sent = run_at_rate(settings, mode, target, args.seconds)
                after = raw_put_rate(settings)
                achieved = sent.sent / sent.seconds
                results[mode].append({"raw_before": before, "raw_after": after, "target": target,
                                      "achieved": achieved, "ratio": achieved / target,
                                      "noisy": abs(after / before - 1) > 0.10})  # fmt: skip
                print(f"{mode:8s} raw {before:,.0f} -> {after:,.0f}/s, target {target:,.0f}/s, achieved "
                      f"{achieved:,.0f}/s, ratio {achieved / target:.3f}", flush=True)  # fmt: skip
    medians = {mode: statistics.median(r["ratio"] for r in runs) for mode, runs in results.items()}
    for mode, ratio in medians.items():
        print(f"{mode}: median achieved / target {ratio:.3f} (target: within 0.95-1.05)")
    write_results("producer", {"machine": facts, "command": command_line(), "parameters": vars(args),
                               "runs": results, "median_ratio": medians})  # fmt: skip


if __name__ == "__main__":
    main()
