"""Routing's cost: one stream drained into three routed tables against the same stream into one table.

One stream is filled once with notebook 01's kind of history plus order events (the generator's
second record kind); then, in the same run and alternating, the ingest drains it with
``available_now`` into a fresh events table (the baseline), and with a route on ``event_type``
(``page_view`` → ``<table>_views``, ``order`` → ``<table>_orders``, every other type →
``<table>_other``) into three fresh routed tables. Same payloads, same session, same batch size.
Measured per drain: wall time and the CPU of this process tree (the Python driver, its JVM and
Spark's Python workers, from ``/proc``; see ``bench_batch_cost.tree_cpu``), reported as records
written per core-second, medians over ``--runs`` and their ratio (routed / one table).

What routing adds per batch: one Spark job that counts the batch's rows per route, one append (and
commit) per routed table instead of one, and on a table's first sight its creation and a commit of
positions. The cost of a column added while streaming is ``bench_schema_evolution.py``'s.

Run: ``.venv/bin/python bench/bench_routing.py [--records 60000] [--runs 3]`` (about 3 minutes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_batch_cost import tree_cpu
from common import banner, bench_session, command_line, new_table_settings, run_ingest, write_results

ROUTE = {"route": "event_type", "route_tables": "page_view=views,order=orders", "route_default": "other"}


def fill(settings: Any, records: int, shards: int, order_rate: float) -> int:
    """Create the stream and send the history (events and orders); return the records Kinesis accepted."""
    from icestream.kinesis.clients import ensure_stream
    from icestream.producer.put import produce
    from icestream.synthetic.generator import backfill_config, generate

    ensure_stream(settings, shard_count=shards)
    generated, _ = generate(backfill_config(hours=3, count=records, seed=7, order_rate=order_rate))
    return produce(settings, generated, progress=False).sent


def drain(spark: Any, stream: str, cap: int, routed: bool) -> dict[str, Any]:
    """Drain the whole stream into fresh tables; its seconds, CPU seconds and rows written."""
    target = new_table_settings(stream, prefix="route" if routed else "single")
    options: dict[str, Any] = {"max_records_per_shard": cap}
    if routed:
        options["routing"] = ROUTE
    root = os.getpid()
    before = tree_cpu(root)
    began = time.perf_counter()
    result = run_ingest(spark, target, **options)
    seconds = time.perf_counter() - began
    after = tree_cpu(root)
    cpu = sum(value - before.get(pid, (kind, 0.0))[1] for pid, (kind, value) in after.items())
    written = sum(batch.get("written", 0) for batch in result["progress"])
    return {
        "seconds": round(seconds, 2),
        "cpu_s": round(cpu, 2),
        "written": written,
        "batches": result["batches"],
        "records_per_core_s": round(written / cpu, 1) if cpu else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--records", type=int, default=60_000, help="records of user-event history (orders come on top)"
    )
    parser.add_argument("--order-rate", type=float, default=1.0, help="order events per second of history, on top")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3, help="drains of each kind (alternating)")
    parser.add_argument("--max-records-per-shard", type=int, default=10_000, help="batch size, per shard")
    args = parser.parse_args()
    facts = banner("routing: three routed tables against one table", command_line())
    with bench_session("routing", shards=args.shards) as (settings, spark):
        sent = fill(settings, args.records, args.shards, args.order_rate)
        print(f"stream {settings.stream_name}: {sent} records in {args.shards} shards", flush=True)
        drain(spark, settings.stream_name, args.max_records_per_shard, routed=False)  # warm-up: JVM, workers
        drain(spark, settings.stream_name, args.max_records_per_shard, routed=True)
        runs: dict[str, list[dict[str, Any]]] = {"one table": [], "three routed tables": []}
        for number in range(args.runs):
            for kind in sorted(runs, reverse=number % 2 == 1):  # alternate which goes first
                result = drain(spark, settings.stream_name, args.max_records_per_shard, kind != "one table")
                runs[kind].append(result)
                rate = result["records_per_core_s"]
                print(f"  {kind:<20} {result['written']:>7} rows in {result['seconds']:6.2f} s, "
                      f"{result['cpu_s']:6.2f} CPU s: {rate:>8} records/core-s", flush=True)  # fmt: skip
    medians = {kind: statistics.median(r["records_per_core_s"] for r in results) for kind, results in runs.items()}
    ratio = medians["three routed tables"] / medians["one table"]
    print(f"median records per core-second: one table {medians['one table']:,.0f}, "
          f"three routed tables {medians['three routed tables']:,.0f}; routed / one table {ratio:.2f}")  # fmt: skip
    write_results(
        "routing",
        {"machine": facts, "command": command_line(), "records_sent": sent, "route": ROUTE, "runs": runs,
         "median_records_per_core_s": medians, "ratio_routed_to_one_table": round(ratio, 3)},
    )  # fmt: skip


if __name__ == "__main__":
    main()
