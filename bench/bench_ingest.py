"""Ingest throughput against the emulator's ceiling (item 1 of the benchmark suite).

One stream is filled once; then, in the same run and against the same stream, a bare boto3
GetRecords loop drains it (the ceiling the issue names: one plain boto3 client, shard after shard)
and the ingest query drains it into a fresh table with ``available_now``, with dedupe on and off.
A second ceiling uses the client the ingest's read tasks use (boto3 with a cheaper timestamp
parser, ``icestream.kinesis.clients``), so a reader can see how much of the ratio that client accounts
for. Reported: medians over ``--runs``, the ratios ingest / ceiling (target >= 0.7 against the bare
loop), and where a drain's time goes by phase (plan, read, parse, dedupe, write, commit; see
``common.batch_phases``).

Run: ``.venv/bin/python bench/bench_ingest.py`` (about 2 minutes), or ``make bench``.
Freshness under a live load moved to ``bench/bench_freshness.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    banner,
    bench_session,
    command_line,
    fill_stream,
    new_table_settings,
    raw_drain,
    run_ingest,
    shown,
    sum_phases,
    summary,
    timed,
    write_results,
)


def throughput(spark: Any, settings: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Drain one stream ``--runs`` times with each reader; medians, ratios and phases."""
    sent = fill_stream(settings, args.records, args.shards)
    print(f"stream {settings.stream_name}: {sent} records in {args.shards} shards", flush=True)
    cap = args.max_records_per_shard

    def ingest(dedupe: bool, prefetch: bool = False) -> dict[str, Any]:
        target = new_table_settings(settings.stream_name)
        return run_ingest(spark, target, dedupe=dedupe, prefetch=prefetch, max_records_per_shard=cap)

    for _ in range(2):  # warm-up: JVM (its JIT keeps improving over the first drains), workers, clients
        ingest(True)
        ingest(True, prefetch=True)
    ceiling, tuned, with_dedupe, without_dedupe, read_ahead = [], [], [], [], []
    variants = [
        (with_dedupe, {"dedupe": True}),
        (without_dedupe, {"dedupe": False}),
        (read_ahead, {"dedupe": True, "prefetch": True}),  # the same query reading the next batch ahead
    ]
    for number in range(args.runs):
        seconds, count = timed(lambda: raw_drain(settings))
        ceiling.append(count / seconds)
        seconds, count = timed(lambda: raw_drain(settings, bare=False))
        tuned.append(count / seconds)
        # Each run starts with another variant, so a drift of the machine favours none of them.
        for results, options in variants[number % 3 :] + variants[: number % 3]:
            results.append(ingest(**options))
        print(
            f"run {number + 1}: ceiling {ceiling[-1]:8.0f} rec/s   same-client ceiling {tuned[-1]:8.0f} rec/s   "
            f"ingest+dedupe {with_dedupe[-1]['rate']:8.0f} rec/s   "
            f"ingest {without_dedupe[-1]['rate']:8.0f} rec/s   read-ahead {read_ahead[-1]['rate']:8.0f} rec/s   "
            f"({with_dedupe[-1]['batches']} batches)",
            flush=True,
        )
    middle = sorted(range(args.runs), key=lambda index: with_dedupe[index]["rate"])[args.runs // 2]
    result = {
        "records": sent,
        "shards": args.shards,
        "max_records_per_shard": cap,
        "ceiling_records_per_s": summary(ceiling),
        "ingest_dedupe_records_per_s": summary([run["rate"] for run in with_dedupe]),
        "ingest_no_dedupe_records_per_s": summary([run["rate"] for run in without_dedupe]),
        "ratio_dedupe_to_ceiling": summary([run["rate"] / raw for run, raw in zip(with_dedupe, ceiling, strict=True)]),
        "same_client_ceiling_records_per_s": summary(tuned),
        "ratio_dedupe_to_same_client_ceiling": summary(
            [run["rate"] / raw for run, raw in zip(with_dedupe, tuned, strict=True)]
        ),
        "ratio_no_dedupe_to_ceiling": summary(
            [run["rate"] / raw for run, raw in zip(without_dedupe, ceiling, strict=True)]
        ),
        "ingest_dedupe_read_ahead_records_per_s": summary([run["rate"] for run in read_ahead]),
        "read_ahead_gain": summary([a["rate"] / b["rate"] for a, b in zip(read_ahead, with_dedupe, strict=True)]),
        "seconds_dedupe": summary([run["seconds"] for run in with_dedupe]),
        "phases_s_median_run": sum_phases(with_dedupe[middle]["phases"]),
        "phases_s_median_run_no_dedupe": sum_phases(without_dedupe[middle]["phases"]),
        "batches": with_dedupe[middle]["batches"],
        "target_ratio": 0.7,
    }
    print(f"ceiling (bare GetRecords):  {shown(result['ceiling_records_per_s'], ' rec/s', 0)}")
    print(f"ceiling (ingest's client):  {shown(result['same_client_ceiling_records_per_s'], ' rec/s', 0)}")
    print(f"ingest, dedupe on:          {shown(result['ingest_dedupe_records_per_s'], ' rec/s', 0)}")
    print(f"ingest, dedupe off:         {shown(result['ingest_no_dedupe_records_per_s'], ' rec/s', 0)}")
    ahead = result["ingest_dedupe_read_ahead_records_per_s"]
    print(f"ingest, dedupe on, read-ahead: {shown(ahead, ' rec/s', 0)}")
    print(f"read-ahead / default (pairwise): {shown(result['read_ahead_gain'])}")
    ratio = result["ratio_dedupe_to_ceiling"]["median"]
    verdict = "met" if ratio >= 0.7 else "NOT met"
    print(f"ratio ingest / ceiling:     {shown(result['ratio_dedupe_to_ceiling'])}; target >= 0.7: {verdict}")
    print(f"ratio to same-client ceiling: {shown(result['ratio_dedupe_to_same_client_ceiling'])}")
    phases = result["phases_s_median_run"]
    print("phases of the median drain (s): " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if k != "records"))
    return result


def sustained(spark: Any, settings: Any, args: argparse.Namespace) -> dict[str, Any]:
    """A longer drain (several full batches): the bare ceiling and the default ingest, pairwise.

    The emulator's GetRecords scans a shard from its start (moto), so its cost per call grows with
    the position read: a long stream slows the one-loop ceiling more than the ingest, which reads
    the shards in parallel. Both figures are reported for that reason.
    """
    from icestream.config import load_settings

    stream = load_settings(stream_name=f"{settings.stream_name}-long", shard_count=args.shards)
    sent = fill_stream(stream, args.sustained_records, args.shards)
    print(f"stream {stream.stream_name}: {sent} records in {args.shards} shards", flush=True)
    ceiling, rates, ratios = [], [], []
    for number in range(args.runs):
        seconds, count = timed(lambda: raw_drain(stream))
        target = new_table_settings(stream.stream_name)
        run = run_ingest(spark, target, max_records_per_shard=args.max_records_per_shard)
        ceiling.append(count / seconds)
        rates.append(run["rate"])
        ratios.append(run["rate"] / ceiling[-1])
        print(f"long run {number + 1}: ceiling {ceiling[-1]:8.0f} rec/s   ingest {rates[-1]:8.0f} rec/s   "
              f"({run['batches']} batches)", flush=True)  # fmt: skip
    result = {
        "records": sent,
        "ceiling_records_per_s": summary(ceiling),
        "ingest_dedupe_records_per_s": summary(rates),
        "ratio_dedupe_to_ceiling": summary(ratios),
    }
    print(f"long drain ratio ingest / ceiling: {shown(result['ratio_dedupe_to_ceiling'])}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000, help="records in the throughput stream")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-records-per-shard", type=int, default=10_000)
    parser.add_argument("--sustained-records", type=int, default=0, help="also drain a stream this long (0: no)")
    args = parser.parse_args()

    facts = banner("ingest throughput vs the emulator's ceiling", command_line())
    with bench_session("ingest", shards=args.shards) as (settings, spark):
        results = {"machine": facts, "command": command_line(), "throughput": throughput(spark, settings, args)}
        if args.sustained_records:
            results["sustained"] = sustained(spark, settings, args)
    write_results("ingest", results)


if __name__ == "__main__":
    main()
