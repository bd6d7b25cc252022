"""The ``kinesis`` source (``spark.readStream.format("kinesis")``) beside icestream's own ingest, on the same streams.

One SparkSession, one emulator; both ways of reading run one after another in the same run, so
each ratio compares figures taken on the same machine minutes apart. The source runs in the
reference job's shape: ``readStream.format("kinesis")`` → ``from_json(col("data").cast("string"),
<the wire schema>)`` → ``writeStream.format("iceberg")`` with a checkpoint and a processing-time
trigger → ``toTable``, a table the sink creates. The own engine is :func:`icestream.start_ingest`
with its defaults (dedupe, rejects table, its own checkpoint). Three measurements:

1. **Backlog**: one stream filled with ``--records`` generated records on ``--shards`` shards, drained
   ``--runs`` times by each, in alternating order after a warm-up drain of each on a small stream:
   the own engine with ``available_now`` (as ``bench_ingest.py`` drains), the source once per
   ``--caps`` value of ``maxFetchRecordsPerShard``. On Spark 4.1 ``availableNow`` over a Python
   source runs one batch, up to the first ``latestOffset``, and stops; so the source drains with a
   ``--backlog-trigger`` processing-time trigger and is stopped once its batches have written every
   record the stream holds (their ``numInputRows``; the table's count is checked afterwards).
   Reported: wall seconds, records per core-second of the process tree (this process, its JVM and
   Python workers: ``common.tree_cpu``; not the emulator), and source / own of CPU per record.
   Goal: the source at its default cap within 1.2x of the own engine's CPU per record.
2. **Tip**: a background producer feeds one stream at ``--tip-rate`` events/s; the own engine, then
   the source, each read it from its tip (both ``latest``) with a 1 s trigger, each
   ``--tip-warmup`` seconds before ``--tip-seconds`` measured (as ``bench_batch_cost.py`` measures).
   Reported: cores used, CPU per batch.
3. **Freshness**: the same at ``--fresh-rate`` events/s with a ``--fresh-trigger`` trigger, for
   ``--fresh-seconds`` each. Per row: its snapshot's ``committed_at`` minus its Kinesis arrival
   (``arrival_ts`` in the own engine's table, ``approximateArrivalTimestamp`` in the source's), the
   snapshot found from the row's data file (``_file``) in the table's ``entries``, one method for both;
   the rows of each query's first snapshot (what arrived while it started) are left out, as
   ``bench_freshness.py`` leaves out batch 0. Reported: p50/p95/p99, cores. Goal: p95 <= 0.8 s.

The live queries run own engine first, then the source, each on a JVM already warm from the backlog
drains. A machine this small (2 cores) is noisy: read the medians and ratios, and the load average.

Run: ``.venv/bin/python bench/bench_kinesis_source.py`` (about 12 minutes), ``--quick`` for a tiny run.
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

from bench_batch_cost import measure
from common import (
    SCRATCH,
    banner,
    bench_session,
    command_line,
    fill_stream,
    load_average,
    new_table_settings,
    run_ingest,
    shown,
    summary,
    tree_cpu,
    write_results,
)

from icestream.kinesis_source.options import DEFAULT_RECORDS_PER_SHARD

NAME = "kinesis_source"
GOAL_CPU_RATIO = 1.2  # the source's CPU per record against the own engine's, at most
GOAL_P95_S = 0.8
OWN = "own"
POLL_SECONDS = 0.25
SOURCE_OPTIONS: dict[str, str] = {}  # more options for every source query (--source-options)


def cpu_since(before: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds of this process tree since ``before``, by process kind (processes gone meanwhile: not counted)."""
    kinds: dict[str, float] = {}
    for pid, (kind, cpu) in tree_cpu(os.getpid()).items():
        kinds[kind] = kinds.get(kind, 0.0) + cpu - before.get(pid, (kind, 0.0))[1]
    return kinds


def table_name(prefix: str) -> str:
    from icestream.config import load_settings

    settings = load_settings()
    return f"{settings.catalog}.{settings.namespace}.{prefix}_{uuid.uuid4().hex[:8]}"


def source_query(spark: Any, settings: Any, table: str, trigger: float, start: str, cap: int | None = None) -> Any:
    """The reference job: Kinesis → ``from_json`` of ``data`` with the event schema → the Iceberg sink → ``table``."""
    from pyspark.sql.functions import col, from_json

    from icestream.kinesis.clients import kinesis_connection
    from icestream.lake.schema import wire_schema

    connection = kinesis_connection(settings)
    reader = (
        spark.readStream.format("kinesis")
        .option("streamName", settings.stream_name)
        .option("regionName", connection.region)
        .option("endpointUrl", connection.endpoint)
        .option("startingPosition", start)
    )
    for key, value in SOURCE_OPTIONS.items():
        reader = reader.option(key, value)
    if cap is not None:
        reader = reader.option("maxFetchRecordsPerShard", str(cap))
    events = (
        reader.load()
        .select(from_json(col("data").cast("string"), wire_schema()).alias("event"), "approximateArrivalTimestamp")
        .select("event.*", "approximateArrivalTimestamp")
    )
    return (
        events.writeStream.format("iceberg")
        .option("checkpointLocation", str(SCRATCH / NAME / "checkpoints" / uuid.uuid4().hex[:8]))
        .trigger(processingTime=f"{trigger} seconds")
        .toTable(table)
    )


def rows_read(query: Any, seen: dict[int, int]) -> int:
    """Rows the query's batches read so far; ``seen`` keeps each batch's across calls (Spark keeps the last 100).

    A no-data progress event carries the next batch's id with 0 rows, hence the maximum per id.
    """
    for progress in query.recentProgress:
        seen[progress["batchId"]] = max(seen.get(progress["batchId"], 0), progress["numInputRows"])
    return sum(seen.values())


def source_drain(spark: Any, settings: Any, records: int, cap: int, trigger: float, timeout: float) -> dict[str, Any]:
    """Drain the stream with the source until its batches have read ``records`` rows; stop it; what it cost."""
    table = table_name("source")
    seen: dict[int, int] = {}
    before, began = tree_cpu(os.getpid()), time.perf_counter()
    query = source_query(spark, settings, table, trigger, "trim_horizon", cap)
    try:
        while rows_read(query, seen) < records:
            if not query.isActive:
                raise SystemExit(f"the source's drain stopped: {query.exception()}")
            if time.perf_counter() - began > timeout:
                raise SystemExit(f"the source's drain read {sum(seen.values())} of {records} rows in {timeout:.0f} s")
            time.sleep(POLL_SECONDS)
        seconds = time.perf_counter() - began
        kinds = cpu_since(before)  # before the stop: the query's Python planner process ends with it
    finally:
        query.stop()
    return {
        "seconds": seconds,
        "cpu_seconds": sum(kinds.values()),
        "cpu_by_kind": kinds,
        "batches": sum(1 for rows in seen.values() if rows),
        "rows": spark.table(table).count(),
    }


def own_drain(spark: Any, settings: Any) -> dict[str, Any]:
    """Drain the stream with the own engine (``available_now``, its defaults) into a fresh table; what it cost."""
    before = tree_cpu(os.getpid())
    result = run_ingest(spark, new_table_settings(settings.stream_name))
    kinds = cpu_since(before)
    return {
        "seconds": result["seconds"],
        "cpu_seconds": sum(kinds.values()),
        "cpu_by_kind": kinds,
        "batches": result["batches"],
        "rows": result["read"],
    }


def backlog(args: argparse.Namespace, spark: Any, settings: Any) -> dict[str, Any]:
    """Measurement 1: the same backlog drained by the own engine and by the source at each cap, alternating."""
    from icestream.config import load_settings

    warm = load_settings(stream_name=f"bench-warm-{uuid.uuid4().hex[:8]}")
    warm_sent = fill_stream(warm, args.warmup_records, args.shards)
    own_drain(spark, warm)
    for cap in args.caps:
        source_drain(spark, warm, warm_sent, cap, args.backlog_trigger, args.timeout)
    print(f"warm-up: {warm_sent:,} records drained once by each", flush=True)

    sent = fill_stream(settings, args.records, args.shards)
    print(f"backlog: {args.shards} shards, {sent:,} records in the stream", flush=True)
    variants = [OWN, *(f"cap {cap}" for cap in args.caps)]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for number in range(args.runs):
        for name in variants if number % 2 == 0 else list(reversed(variants)):
            if name == OWN:
                result = own_drain(spark, settings)
            else:
                cap = int(name.split()[1])
                result = source_drain(spark, settings, sent, cap, args.backlog_trigger, args.timeout)
            result["records_per_cpu_s"] = sent / result["cpu_seconds"]
            result["cpu_ms_per_record"] = 1000 * result["cpu_seconds"] / sent
            runs[name].append(result)
            print(
                f"  {name:>10} run {number + 1}: {result['seconds']:6.1f} s, {result['cpu_seconds']:6.1f} CPU-s "
                f"({', '.join(f'{k} {v:.1f}' for k, v in sorted(result['cpu_by_kind'].items()))}), "
                f"{result['records_per_cpu_s']:6.0f} rec/CPU-s, {result['batches']} batches, {result['rows']:,} rows",
                flush=True,
            )
    medians = {
        name: {
            "seconds": summary([run["seconds"] for run in done]),
            "records_per_cpu_s": summary([run["records_per_cpu_s"] for run in done]),
            "cpu_ms_per_record": summary([run["cpu_ms_per_record"] for run in done]),
        }
        for name, done in runs.items()
    }
    own = medians[OWN]["cpu_ms_per_record"]["median"]
    ratios = {name: medians[name]["cpu_ms_per_record"]["median"] / own for name in variants if name != OWN}
    return {"records": sent, "shards": args.shards, "runs": runs, "medians": medians, "cpu_ratio_to_own": ratios}


def live_stream(rate: float, duration: float) -> Any:
    """A fresh 4-shard stream that a background producer feeds at ``rate`` events/s for ``duration`` seconds."""
    from icestream.config import load_settings
    from icestream.kinesis.clients import ensure_stream
    from icestream.producer.background import start_background_producer

    suffix = uuid.uuid4().hex[:8]
    settings = load_settings(stream_name=f"bench-live-{suffix}", table=f"live_{suffix}")
    ensure_stream(settings, shard_count=4)
    start_background_producer(settings, rate=rate, duration=duration, bad_rate=0.0, duplicate_rate=0.0, late_rate=0.0)
    return settings


def start_own(spark: Any, settings: Any, trigger: float) -> tuple[Any, str]:
    """The own engine from the stream's tip into a fresh table: the query and its table."""
    from icestream import start_ingest
    from icestream.lake import setup_tables

    target = new_table_settings(settings.stream_name)
    setup_tables(spark, target)
    return start_ingest(spark, target, trigger_seconds=trigger, starting_position="latest"), target.table_name


def batch_counter(query: Any) -> Any:
    """The query's last batch id, for either kind of query (the own engine's handle or Spark's)."""
    if hasattr(query, "last_progress"):
        return lambda: (query.last_progress or {"batch_id": -1})["batch_id"]
    return lambda: (query.lastProgress or {"batchId": -1})["batchId"]


def batch_ms(query: Any) -> dict[str, float]:
    """The median of each timed step (ms) over the query's batches that read rows, but the first (its start).

    The own engine reports its phases (``duration_ms``: plan, read, parse, dedupe, write_events, ...),
    Spark's query its steps (``durationMs``: latestOffset, addBatch, walCommit, commitOffsets, ...).
    """
    if hasattr(query, "recent_progress"):
        batches = [(b["batch_id"], b["num_input_rows"], b["duration_ms"]) for b in query.recent_progress]
    else:
        batches = [(b["batchId"], b["numInputRows"], b["durationMs"]) for b in query.recentProgress]
    steady = [durations for batch_id, rows, durations in batches if rows and batch_id >= 1]
    keys = sorted({key for durations in steady for key in durations})
    return {key: round(statistics.median(d.get(key, 0.0) for d in steady), 1) for key in keys}


def check_running(query: Any, name: str) -> None:
    """Stop the benchmark when a live query died (its figures would be of an idle process)."""
    active = query.is_active if hasattr(query, "is_active") else query.isActive
    if not active:
        raise SystemExit(f"the {name} query stopped: {query.exception()}")


def stop(query: Any) -> None:
    query.stop()
    if hasattr(query, "await_termination"):
        query.await_termination()


def tip(args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    """Measurement 2: one stream at ``--tip-rate`` events/s, read at its tip by the own engine, then by the source."""
    from icestream.producer.background import stop_background_producer

    window = args.tip_warmup + args.tip_seconds
    settings = live_stream(args.tip_rate, 2 * window + 60)
    results: dict[str, Any] = {}
    try:
        for name in (OWN, "source"):
            if name == OWN:
                query, table = start_own(spark, settings, 1.0)
            else:
                table = table_name("tip")
                query = source_query(spark, settings, table, 1.0, "latest")
            try:
                time.sleep(args.tip_warmup)
                figures = measure(batch_counter(query), args.tip_seconds)
                figures["batch_ms_median"] = batch_ms(query)
                check_running(query, name)
            finally:
                stop(query)
            figures["rows"] = spark.table(table).count()
            results[name] = figures
            print(f"  tip {name:>6}: " + ", ".join(f"{key} {value}" for key, value in figures.items()), flush=True)
    finally:
        stop_background_producer(settings)
    results["cores_ratio_to_own"] = results["source"]["cores"] / results[OWN]["cores"]
    return results


def row_freshness(spark: Any, table: str, arrival: str) -> Any:
    """Seconds from Kinesis arrival to its snapshot's commit, per row, with the snapshot's commit time.

    A row's snapshot is the one that added its data file (``entries``; a merged manifest keeps the
    adding snapshot's id on an existing entry). Nothing here rewrites files, so each file has one.
    """
    return spark.sql(
        f"""
        WITH added AS (SELECT data_file.file_path AS file, snapshot_id FROM {table}.entries WHERE status < 2),
             rows AS (SELECT _file AS file, {arrival} AS arrival FROM {table})
        SELECT s.snapshot_id, unix_micros(s.committed_at) / 1e6 AS committed,
               (unix_micros(s.committed_at) - unix_micros(rows.arrival)) / 1e6 AS freshness_s
        FROM rows JOIN added USING (file) JOIN {table}.snapshots AS s USING (snapshot_id)
        """
    ).toPandas()


def freshness(args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    """Measurement 3: one stream at ``--fresh-rate`` events/s; each query's rows' freshness and its cores."""
    from icestream.producer.background import stop_background_producer
    from icestream.queries.report import percentiles

    trigger, seconds = args.fresh_trigger, args.fresh_seconds
    settings = live_stream(args.fresh_rate, 2 * (seconds + 15) + 60)
    results: dict[str, Any] = {}
    try:
        for name in (OWN, "source"):
            if name == OWN:
                query, table = start_own(spark, settings, trigger)
                arrival = "arrival_ts"
            else:
                table = table_name("fresh")
                query = source_query(spark, settings, table, trigger, "latest")
                arrival = "approximateArrivalTimestamp"
            try:
                time.sleep(3)  # the query started and committed its first batch (left out below)
                before, wall = tree_cpu(os.getpid()), time.monotonic()
                time.sleep(seconds)
                cores = sum(cpu_since(before).values()) / (time.monotonic() - wall)
                time.sleep(trigger + 1)  # the batch reading the window's last records commits
                steps = batch_ms(query)
                check_running(query, name)
            finally:
                stop(query)
            frame = row_freshness(spark, table, arrival)
            first = frame["committed"].min() if len(frame) else None
            steady = frame[frame["committed"] > first] if first is not None else frame
            figures = {
                "rows": len(steady),
                "snapshots": int(steady["snapshot_id"].nunique()),
                **percentiles(steady["freshness_s"]),
                "cores": round(cores, 3),
                "batch_ms_median": steps,
            }
            results[name] = figures
            quantiles = ", ".join(f"{key} {figures[key]:.2f} s" for key in ("p50", "p95", "p99") if key in figures)
            print(
                f"  freshness {name:>6}: {quantiles}, {figures['cores']:.2f} cores ({figures['rows']} rows in "
                f"{figures['snapshots']} snapshots); median ms per batch: {steps}",
                flush=True,
            )
    finally:
        stop_background_producer(settings)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="the backlog's records")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2, help="drains of the backlog per variant")
    parser.add_argument("--caps", default=f"2000,{DEFAULT_RECORDS_PER_SHARD},50000",
                        help="the source's maxFetchRecordsPerShard values, comma-separated")  # fmt: skip
    parser.add_argument("--backlog-trigger", type=float, default=0.5, help="the source's trigger while draining (s)")
    parser.add_argument("--warmup-records", type=int, default=20_000, help="the warm-up stream's records")
    parser.add_argument("--timeout", type=float, default=300.0, help="a source drain fails after this long")
    parser.add_argument("--tip-rate", type=float, default=100.0)
    parser.add_argument("--tip-warmup", type=float, default=60.0, help="seconds each tip query runs before measuring")
    parser.add_argument("--tip-seconds", type=float, default=30.0, help="seconds measured per tip query")
    parser.add_argument("--fresh-rate", type=float, default=500.0)
    parser.add_argument("--fresh-trigger", type=float, default=0.5)
    parser.add_argument("--fresh-seconds", type=float, default=25.0, help="seconds measured per freshness query")
    parser.add_argument("--source-options", default="", help="more source options, KEY=VALUE,... (shardsPerTask=4)")
    parser.add_argument("--only", default="backlog,tip,freshness", help="comma-separated: backlog, tip, freshness")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: does it run? (figures mean little)")
    args = parser.parse_args()
    if args.quick:
        args.records, args.runs, args.warmup_records, args.caps = 8_000, 1, 2_000, f"2000,{DEFAULT_RECORDS_PER_SHARD}"
        args.tip_warmup, args.tip_seconds, args.fresh_seconds = 8.0, 6.0, 6.0
    args.caps = [int(cap) for cap in args.caps.split(",")]
    only = set(args.only.split(","))
    SOURCE_OPTIONS.update(pair.split("=", 1) for pair in args.source_options.split(",") if pair)

    facts = banner("the kinesis source beside the own ingest engine, on the same streams", command_line())
    print(
        "note: on Spark 4.1 availableNow over a Python source runs one batch (up to the first latestOffset), so the "
        f"source drains with a {args.backlog_trigger:g} s processing-time trigger and is stopped once its batches "
        "have read every record"
    )
    result: dict[str, Any] = {"machine": facts, "command": command_line(), "default_cap": DEFAULT_RECORDS_PER_SHARD,
                              "goal_cpu_ratio": GOAL_CPU_RATIO, "goal_p95_s": GOAL_P95_S,
                              "source_options": SOURCE_OPTIONS}  # fmt: skip
    with bench_session(NAME, shards=args.shards) as (settings, spark):
        from icestream.kinesis_source.data_source import register

        register(spark)
        if "backlog" in only:
            result["backlog"] = backlog(args, spark, settings)
        if "tip" in only:
            result["tip"] = tip(args, spark)
        if "freshness" in only:
            result["freshness"] = freshness(args, spark)

    print("\nsummary")
    if "backlog" in result:
        found = result["backlog"]
        for name, median in found["medians"].items():
            print(f"  backlog {name:>10}: {shown(median['records_per_cpu_s'], ' rec/CPU-s', 0)}; "
                  f"wall {shown(median['seconds'], ' s', 1)}")  # fmt: skip
        for name, ratio in found["cpu_ratio_to_own"].items():
            print(f"  backlog {name:>10} / own, CPU per record: {ratio:.2f}")
        default = found["cpu_ratio_to_own"].get(f"cap {DEFAULT_RECORDS_PER_SHARD}")
        if default is not None:
            verdict = "met" if default <= GOAL_CPU_RATIO else "NOT met"
            print(f"  goal: the source (default cap {DEFAULT_RECORDS_PER_SHARD}) within {GOAL_CPU_RATIO}x the own "
                  f"engine's CPU per record: {default:.2f}x, {verdict}")  # fmt: skip
        cheapest = min(found["cpu_ratio_to_own"], key=found["cpu_ratio_to_own"].get)
        print(f"  cheapest per record of the caps tried: {cheapest} ({found['cpu_ratio_to_own'][cheapest]:.2f}x own)")
        found["cheapest_cap"] = int(cheapest.split()[1])
    if "tip" in result:
        found = result["tip"]
        print(f"  tip {args.tip_rate:g} ev/s, 1 s trigger: own {found[OWN]['cores']:.3f} cores, source "
              f"{found['source']['cores']:.3f} cores; source / own {found['cores_ratio_to_own']:.2f}")  # fmt: skip
    if "freshness" in result:
        found = result["freshness"]
        for name in (OWN, "source"):
            if "p95" in found[name]:
                verdict = "met" if found[name]["p95"] <= GOAL_P95_S else "NOT met"
                print(f"  freshness {args.fresh_rate:g} ev/s, {args.fresh_trigger:g} s trigger, {name}: p50 "
                      f"{found[name]['p50']:.2f} s, p95 {found[name]['p95']:.2f} s (goal p95 <= {GOAL_P95_S} s: "
                      f"{verdict})")  # fmt: skip
    result["load_average_at_end"] = load_average()
    print(f"  load average at the end: {result['load_average_at_end']}")
    write_results(NAME, result)


if __name__ == "__main__":
    main()
