"""The ingest's own cost per record against Spark's native JSON load, and end to end against the ceiling.

Two measurements, each alternating its two sides in one run:

1. **Pipeline vs native, per core-second.** The same generated payloads go (a) through the ingest's
   record pipeline after GetRecords -- decode, parse, validate, reject, dedupe, write, commit: the
   real ``start_ingest(available_now=True)`` query, its read tasks fed Kinesis-shaped records
   (``Data`` bytes, ``SequenceNumber``, ``PartitionKey``, ``ApproximateArrivalTimestamp``) from
   memory instead of GetRecords -- and (b) through Spark's native path, ``spark.read.schema(...)
   .json(file)`` → ``writeTo(table).append()``, each into a fresh events table. The cost is the CPU
   time of this process (the driver), its JVM and the JVM's Python workers (psutil), so the other
   helpers' processes and the emulator (which only answers ListShards here) do not count. Reported:
   records per core-second of each, and their ratio per pair (target ≥ 0.8), with the split of
   the pipeline's CPU between driver, JVM and Python workers and its batches' phases.
2. **End to end.** One stream filled in the emulator, drained alternately by a bare boto3
   GetRecords loop (``common.raw_drain``, the ceiling of ``bench_ingest.py``: one client, shard
   after shard), by the same loop in one process per shard (``common.parallel_drain``: shards side
   by side, as the ingest reads them) and by the ingest (``available_now``, dedupe on) into a fresh
   table: records per wall second and the ratios (target ≥ 1.0 against the first), and the
   emulator's CPU per drain (it serves both sides from the same cores). The ingest is measured
   warm, as a running ingest is: ``--e2e-warmup`` unmeasured drains first (the JVM compiles the
   ingest's code over about a dozen), whose seconds are reported, with the first drain's ratio to
   a bare loop run just before it; then ``--e2e-runs`` rounds (5), since the bare loop's rate swings
   between two speeds on a shared host.

Both sides run in the session's one JVM, with the JVM's default compilers; ``--c1`` starts it with
C1 only, as ``icestream ingest --available-now`` runs a drain (``icestream.runtime.java_options``),
and writes ``pipeline_c1.json``. The native load's JSON parsing is JVM code that C2 makes faster once
it has compiled it; most of the pipeline's per-record work is Python, Arrow and zstd, which no JIT
touches, so the ratio depends on the choice: compare runs of the same mode.

Run: ``.venv/bin/python bench/bench_pipeline.py`` (about 4 minutes; ``--help`` for sizes).
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import os
import pickle
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    SCRATCH,
    banner,
    bench_session,
    command_line,
    fill_stream,
    line_records,
    new_table_settings,
    parallel_drain,
    raw_drain,
    run_ingest,
    shown,
    sum_phases,
    summary,
    timed,
    write_results,
)

from icestream.runtime.java_options import C1_ONLY

TARGET_PER_CORE = 0.8
TARGET_END_TO_END = 1.0


# -- in-memory GetRecords ---------------------------------------------------------------------------


class MemoryKinesis:
    """GetShardIterator / GetRecords over per-shard records pickled to a folder (read by the workers).

    This class and :func:`memory_read_arrow` are defined in the script, so Spark ships them to its
    Python workers by value; the loaded records stay in the worker (it is reused) between batches.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.shards: dict[str, list[dict[str, Any]]] = {}

    def _records(self, shard_id: str) -> list[dict[str, Any]]:
        if shard_id not in self.shards:
            with open(f"{self.folder}/{shard_id}.pickle", "rb") as source:
                self.shards[shard_id] = pickle.load(source)  # noqa: S301 - written by this script
        return self.shards[shard_id]

    def get_shard_iterator(self, StreamName: str, ShardId: str, ShardIteratorType: str, **where: Any) -> dict:  # noqa: N803
        records = self._records(ShardId)
        index = 0
        if ShardIteratorType == "AFTER_SEQUENCE_NUMBER":
            keys = [int(record["SequenceNumber"]) for record in records]
            index = bisect.bisect_right(keys, int(where["StartingSequenceNumber"]))
        return {"ShardIterator": f"{ShardId}|{index}"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict:  # noqa: N803
        shard_id, _, start = ShardIterator.partition("|")
        records = self._records(shard_id)
        begin = int(start)
        page = records[begin : begin + Limit]
        end = begin + len(page)
        behind = 0 if end >= len(records) else 1000
        return {"Records": page, "NextShardIterator": f"{shard_id}|{end}", "MillisBehindLatest": behind}


def memory_read_arrow(folder: str) -> Any:
    """A stand-in for ``read_task.read_arrow``: the same task function, its client the records in memory."""
    from icestream.ingest.reading import task_function as read_task

    original = read_task.read_arrow

    def read_arrow(options: Any, *plans: Any) -> Any:
        task = original(options, *plans)

        def run(batches: Any) -> Any:
            from icestream.ingest.reading import shard_reader as worker_reader

            client = worker_reader._CLIENTS.get(("bench-memory", folder))
            if client is None:
                client = worker_reader._CLIENTS[("bench-memory", folder)] = MemoryKinesis(folder)
            key = (options.connection, options.read_timeout)
            worker_reader._CLIENTS[key] = client
            try:
                yield from task(batches)
            finally:
                # Workers are reused: a later read of the real stream must get a real client again.
                worker_reader._CLIENTS.pop(key, None)

        return run

    return read_arrow


def shard_records(records: list[Any], shards: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records as GetRecords returns them, routed to shards by the MD5 of the partition key (as Kinesis does)."""
    starts = [int(shard["HashKeyRange"]["StartingHashKey"]) for shard in shards]
    routed: dict[str, list[dict[str, Any]]] = {shard["ShardId"]: [] for shard in shards}
    for number, record in enumerate(records):
        hashed = int.from_bytes(hashlib.md5(record.partition_key.encode()).digest(), "big")  # noqa: S324
        shard = shards[bisect.bisect_right(starts, hashed) - 1]["ShardId"]
        routed[shard].append(
            {
                "SequenceNumber": str(49_000_000_000_000_000_000_000_000_000_000_000_000 + number),
                "ApproximateArrivalTimestamp": datetime.fromtimestamp(record.send_at, UTC),
                "Data": record.data,
                "PartitionKey": record.partition_key,
            }
        )
    return routed


# -- CPU of this process, its JVM and the JVM's Python workers ----------------------------------------


class CpuMeter:
    """Core-seconds used by the driver process, its JVM and the JVM's descendants (Python workers)."""

    def __init__(self, spark: Any) -> None:
        import os

        import psutil

        self.driver = psutil.Process(os.getpid())
        self.jvm = psutil.Process(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))

    def sample(self) -> dict[str, float]:
        """Cumulative core-seconds per group: ``driver``, ``jvm``, ``workers`` (ended ones via their parents)."""
        import psutil

        def used(process: Any, children: bool) -> float:
            try:
                times = process.cpu_times()
            except psutil.Error:
                return 0.0
            total = times.user + times.system
            return total + (times.children_user + times.children_system if children else 0.0)

        workers = sum(used(child, True) for child in self.jvm.children(recursive=True))
        jvm = used(self.jvm, False)
        jvm_children = 0.0
        try:
            times = self.jvm.cpu_times()
            jvm_children = times.children_user + times.children_system
        except psutil.Error:
            pass
        return {"driver": used(self.driver, False), "jvm": jvm, "workers": workers + jvm_children}

    def measure(self, action: Any) -> tuple[dict[str, float], float, Any]:
        """CPU used per group while ``action`` runs, its wall seconds and its result."""
        before = self.sample()
        seconds, result = timed(action)
        after = self.sample()
        return {key: max(0.0, after[key] - before[key]) for key in before}, seconds, result


# -- the two sides ----------------------------------------------------------------------------------


def native_load(spark: Any, settings: Any, payload_file: Path) -> int:
    """Spark's own path: JSON lines with the explicit wire schema → a fresh events table."""
    from pyspark.sql import functions as F  # noqa: N812

    from icestream.lake import setup_tables
    from icestream.lake.schema import METADATA_COLUMNS, wire_schema

    target = new_table_settings(settings.stream_name, prefix="native")
    setup_tables(spark, target)
    frame = spark.read.schema(wire_schema()).json(str(payload_file))
    metadata = [F.lit(None).cast("string").alias(name) for name in METADATA_COLUMNS if not name.endswith("_ts")]
    columns = [
        "event_id", "user_id", "session_id", "event_type", F.to_timestamp("event_ts").alias("event_ts"),
        "properties", "device_info", *metadata, F.to_timestamp("event_ts").alias("arrival_ts"),
        F.current_timestamp().alias("ingest_ts"),
    ]  # fmt: skip
    # Rows without an event id cannot go into the table (event_id is NOT NULL). No shuffle before
    # the write, as in the ingest's appends: the stricter baseline (a hash shuffle only adds cost).
    valid = frame.where(F.col("event_id").isNotNull()).select(*columns)
    valid.writeTo(target.table_name).option("distribution-mode", "none").append()
    return spark.table(target.table_name).count()


def pipeline_load(spark: Any, settings: Any, cap: int) -> dict[str, Any]:
    """The ingest query over the in-memory records into a fresh table (dedupe on)."""
    target = new_table_settings(settings.stream_name, prefix="pipeline")
    return run_ingest(spark, target, dedupe=True, max_records_per_shard=cap)


def per_core(args: argparse.Namespace, spark: Any, settings: Any) -> dict[str, Any]:
    """Pipeline and native, alternating, per core-second; ratios per pair."""
    from icestream.ingest.reading import spark_job as read_job
    from icestream.kinesis.clients import ensure_stream, kinesis_client, list_shards

    records = line_records(args.records, args.seed)
    ensure_stream(settings, shard_count=args.shards)  # empty: only ListShards is asked of it
    folder = SCRATCH / "pipeline" / "records"
    folder.mkdir(parents=True, exist_ok=True)
    routed = shard_records(records, list_shards(kinesis_client(settings), settings.stream_name))
    for shard_id, rows in routed.items():
        (folder / f"{shard_id}.pickle").write_bytes(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL))
    payload_file = folder.parent / "payloads.jsonl"
    payload_file.write_bytes(b"".join(record.data + b"\n" for record in records))
    read_job.read_arrow = memory_read_arrow(str(folder))  # the read tasks' client: the records in memory
    print(f"{len(records):,} records ({sum(len(r.data) for r in records) / len(records):.0f} bytes on average) "
          f"in {args.shards} shards: {', '.join(str(len(rows)) for rows in routed.values())}", flush=True)  # fmt: skip

    meter = CpuMeter(spark)
    sides = {
        "pipeline": lambda: pipeline_load(spark, settings, args.max_records_per_shard),
        "native": lambda: native_load(spark, settings, payload_file),
    }
    for _ in range(args.warmup):
        for action in sides.values():
            action()
    runs: dict[str, list[dict[str, Any]]] = {"pipeline": [], "native": []}
    for number in range(args.runs):
        order = list(sides) if number % 2 == 0 else list(reversed(sides))
        for name in order:
            cpu, seconds, result = meter.measure(sides[name])
            core_seconds = sum(cpu.values())
            runs[name].append({"cpu": cpu, "core_seconds": core_seconds, "seconds": seconds, "result": result,
                               "per_core_second": len(records) / core_seconds})  # fmt: skip
        pipe, native = runs["pipeline"][-1], runs["native"][-1]
        written = sum(batch["written"] or 0 for batch in pipe["result"]["progress"])
        print(
            f"run {number + 1}: pipeline {pipe['per_core_second']:8.0f} rec/core-s ({pipe['core_seconds']:.1f} "
            f"core-s, {pipe['seconds']:.1f} s, {written:,} written)   native {native['per_core_second']:8.0f} "
            f"rec/core-s ({native['core_seconds']:.1f} core-s, {native['seconds']:.1f} s)   "
            f"ratio {pipe['per_core_second'] / native['per_core_second']:.2f}",
            flush=True,
        )
    pipe_runs, native_runs = runs["pipeline"], runs["native"]
    middle = sorted(range(args.runs), key=lambda index: pipe_runs[index]["per_core_second"])[args.runs // 2]
    split = {key: statistics.median(run["cpu"][key] for run in pipe_runs) for key in ("driver", "jvm", "workers")}
    result = {
        "records": len(records),
        "shards": args.shards,
        "max_records_per_shard": args.max_records_per_shard,
        "pipeline_records_per_core_second": summary([run["per_core_second"] for run in pipe_runs]),
        "native_records_per_core_second": summary([run["per_core_second"] for run in native_runs]),
        "ratio_pipeline_to_native": summary(
            [a["per_core_second"] / b["per_core_second"] for a, b in zip(pipe_runs, native_runs, strict=True)]
        ),
        "pipeline_records_per_s": summary([len(records) / run["seconds"] for run in pipe_runs]),
        "native_records_per_s": summary([len(records) / run["seconds"] for run in native_runs]),
        "pipeline_core_seconds_by_process": split,
        "native_core_seconds_by_process": {
            key: statistics.median(run["cpu"][key] for run in native_runs) for key in ("driver", "jvm", "workers")
        },
        "pipeline_phases_s_median_run": sum_phases(pipe_runs[middle]["result"]["phases"]),
        "pipeline_batches": pipe_runs[middle]["result"]["batches"],
        "target_ratio": TARGET_PER_CORE,
    }
    print(f"pipeline: {shown(result['pipeline_records_per_core_second'], ' rec/core-s', 0)}")
    print(f"native:   {shown(result['native_records_per_core_second'], ' rec/core-s', 0)}")
    ratio = result["ratio_pipeline_to_native"]["median"]
    print(f"ratio pipeline / native per core-second: {shown(result['ratio_pipeline_to_native'])}; "
          f"target >= {TARGET_PER_CORE}: {'met' if ratio >= TARGET_PER_CORE else 'NOT met'}")  # fmt: skip
    print("pipeline core-seconds by process (median): " + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))
    phases = result["pipeline_phases_s_median_run"]
    print("pipeline phases of the median run (s): " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
    return result


def emulator_process(settings: Any) -> Any:
    """The emulator's process (its state file names the pid), for its CPU time."""
    import psutil

    from icestream.kinesis.emulator import Emulator

    return psutil.Process(Emulator(settings.path("run_dir")).status().pid)


def cpu_seconds(process: Any) -> float:
    times = process.cpu_times()
    return times.user + times.system


def end_to_end(args: argparse.Namespace, spark: Any, settings: Any) -> dict[str, Any]:
    """The ingest draining the emulator against the bare GetRecords loop, alternating."""
    from icestream.config import load_settings

    stream = load_settings(stream_name=f"{settings.stream_name}-e2e", shard_count=args.shards)
    sent = fill_stream(stream, args.e2e_records, args.shards, seed=args.seed)
    print(f"stream {stream.stream_name}: {sent:,} records in {args.shards} shards", flush=True)

    def ingest() -> dict[str, Any]:
        result = run_ingest(spark, new_table_settings(stream.stream_name), dedupe=True,
                            max_records_per_shard=args.max_records_per_shard)  # fmt: skip
        read = sum(batch["num_input_rows"] for batch in result["progress"])
        if read != sent:  # it must have drained this stream, nothing else
            raise SystemExit(f"the ingest read {read:,} records, the stream holds {sent:,}")
        return result

    # The ingest's JVM code takes many drains to compile (C2): warm drains of this stream fell from
    # 2.8 to 1.45 s over the first dozen ingests of a session, 2026-11-28. A running ingest is warm;
    # the first drain and the warm-up curve are reported beside the warm runs.
    emulator = emulator_process(stream)
    first_loop = timed(lambda: raw_drain(stream))[0]
    warming = [ingest()["seconds"] for _ in range(max(1, args.e2e_warmup))]
    print(f"warm-up: {len(warming)} ingests, seconds {' '.join(f'{s:.2f}' for s in warming)}; the first / "
          f"the bare loop before it: {first_loop / warming[0]:.2f}", flush=True)  # fmt: skip
    ceiling, parallel, rates = [], [], []
    serving: dict[str, list[float]] = {"ceiling": [], "ingest": []}  # the emulator's CPU per drain
    for number in range(args.e2e_runs):
        steps = ["ceiling", "parallel", "ingest"]
        for name in steps if number % 2 == 0 else reversed(steps):
            before = cpu_seconds(emulator)
            if name == "ceiling":
                seconds, count = timed(lambda: raw_drain(stream))
                ceiling.append(count / seconds)
            elif name == "parallel":
                count, seconds = parallel_drain(stream)
                parallel.append(count / seconds)
            else:
                rates.append(ingest()["rate"])
            if name in serving:
                serving[name].append(cpu_seconds(emulator) - before)
        print(f"e2e run {number + 1}: ceiling {ceiling[-1]:8.0f} rec/s (shards side by side {parallel[-1]:8.0f})   "
              f"ingest {rates[-1]:8.0f} rec/s   ratio {rates[-1] / ceiling[-1]:.2f} "
              f"({rates[-1] / parallel[-1]:.2f})   emulator CPU: loop {serving['ceiling'][-1]:.2f} s, "
              f"ingest {serving['ingest'][-1]:.2f} s", flush=True)  # fmt: skip
    result = {
        "records": sent,
        "ceiling_records_per_s": summary(ceiling),
        "parallel_ceiling_records_per_s": summary(parallel),
        "ingest_records_per_s": summary(rates),
        "ratio_ingest_to_ceiling": summary([a / b for a, b in zip(rates, ceiling, strict=True)]),
        "ratio_ingest_to_parallel_ceiling": summary([a / b for a, b in zip(rates, parallel, strict=True)]),
        "warmup_ingest_seconds": [round(seconds, 3) for seconds in warming],
        "first_ingest_ratio_to_ceiling": first_loop / warming[0],
        # What serving one drain cost the emulator (it shares the two cores): a floor under both sides' time.
        "emulator_cpu_seconds": {name: summary(values) for name, values in serving.items()},
        "target_ratio": TARGET_END_TO_END,
    }
    ratio = result["ratio_ingest_to_ceiling"]["median"]
    print(f"end to end, ingest / bare GetRecords ceiling: {shown(result['ratio_ingest_to_ceiling'])}; "
          f"target >= {TARGET_END_TO_END}: {'met' if ratio >= TARGET_END_TO_END else 'NOT met'}")  # fmt: skip
    print(f"  against the loop reading shards side by side (a process per shard, {os.cpu_count()} at once): "
          f"{shown(result['ratio_ingest_to_parallel_ceiling'])}")  # fmt: skip
    print(f"  the emulator's CPU per drain: loop {shown(result['emulator_cpu_seconds']['ceiling'], ' s')}, "
          f"ingest {shown(result['emulator_cpu_seconds']['ingest'], ' s')}")  # fmt: skip
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="generated records for pipeline vs native")
    parser.add_argument("--e2e-records", type=int, default=60_000, help="records in the end-to-end stream (0: skip)")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs of each side first")
    parser.add_argument("--e2e-warmup", type=int, default=12, help="unmeasured ingests of the end-to-end stream first")
    parser.add_argument(
        "--e2e-runs", type=int, default=5,
        help="measured rounds of the end-to-end part (the bare loop's rate swings on a shared host)",
    )  # fmt: skip
    parser.add_argument(
        "--max-records-per-shard", type=int, default=None,
        help="per shard and batch (default: the ingest's own, 10,000 doubling to 40,000 during a backlog)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--c1", action="store_true",
        help="the session's JVM with C1 only, as `icestream ingest --available-now` runs (writes pipeline_c1.json)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.c1:  # read by spark-submit when the session's JVM starts (both sides run in that JVM)
        os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {C1_ONLY}".strip()

    facts = banner("ingest pipeline vs Spark's native JSON load, and end to end", command_line())
    with bench_session("pipeline", shards=args.shards) as (settings, spark):
        jit = "C1 only" if args.c1 else "default"
        results: dict[str, Any] = {"machine": facts, "command": command_line(), "jit": jit}
        from icestream.ingest.reading import spark_job as read_job

        real_reader = read_job.read_arrow
        try:
            results["per_core"] = per_core(args, spark, settings)
        finally:
            # per_core's read tasks read from memory; the end-to-end ingest must read the emulator
            # (until 2026-11-23 it did not: its "ingest" rates were the in-memory records' drain).
            read_job.read_arrow = real_reader
        if args.e2e_records:
            results["end_to_end"] = end_to_end(args, spark, settings)
    write_results("pipeline_c1" if args.c1 else "pipeline", results)


if __name__ == "__main__":
    main()
