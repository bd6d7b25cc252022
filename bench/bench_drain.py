"""A backlog drain as a user runs one: ``icestream ingest --available-now`` on a filled stream, its cost
per record and its memory, by shards and backlog.

For each size (shards × records) one stream is filled in the emulator with generated events, then
drained from ``trim_horizon`` into a fresh events table by the CLI, in a process of its own, as a
scheduled run starts it. The process tree (the CLI, its driver JVM, Spark's Python workers; not the
emulator) is sampled every quarter second: CPU seconds (user + system) per process kind and the
tree's resident memory. Reported per size: records per second of the whole command, records per
CPU-second, the peak resident memory of the tree and of the JVM, and the CPU a record costs at the
margin (between two backlogs on the same shards: the extra CPU over the extra records), against
which the fixed cost of a drain shows.

``--variant NAME`` adds a second way to run the same drains, alternated with the default run by run
(the baseline is measured in the same run): more ``icestream ingest`` arguments (``--variant-args``,
e.g. ``--shards-per-task 1``), the driver JVM's options (``--variant-java-options=...``, given through
``SPARK_SUBMIT_OPTS``) or another checkout's code (``--variant-checkout DIR``: a clone set up with
``make setup``, whose ``icestream`` runs the drain). Reported: the ratio of their records per CPU-second.

Run: ``.venv/bin/python bench/bench_drain.py`` (4 shards, 200,000 and 600,000 records, 2 runs: about
8 minutes); ``--shards 4 32 128 --records 200000 600000 --runs 2`` for the scale table.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, bench_session, command_line, fill_stream, shown, summary, tree_cpu, write_results

SAMPLE_SECONDS = 0.25
PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_mib(pids: list[int]) -> float:
    """The resident memory of ``pids`` now, in MiB (a process gone meanwhile counts 0)."""
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
    return total / 2**20


class TreeSampler:
    """Samples a process tree until stopped: CPU seconds by pid (the last seen) and peak memory."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.cpu: dict[int, tuple[str, float]] = {}
        self.peak_mib = 0.0
        self.peak_jvm_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            found = tree_cpu(self.root)
            self.cpu.update(found)
            self.peak_mib = max(self.peak_mib, resident_mib(list(found)))
            jvms = [pid for pid, (kind, _) in found.items() if kind == "jvm"]
            self.peak_jvm_mib = max(self.peak_jvm_mib, resident_mib(jvms))
            self._stop.wait(SAMPLE_SECONDS)

    def cpu_by_kind(self) -> dict[str, float]:
        kinds: dict[str, float] = {}
        for kind, seconds in self.cpu.values():
            kinds[kind] = kinds.get(kind, 0.0) + seconds
        return kinds


def drain(stream: str, table: str, variant: dict[str, str]) -> dict[str, Any]:
    """``icestream ingest --available-now`` of ``stream`` into ``table``, sampled; what it cost."""
    environment = {**os.environ, "ICESTREAM_STREAM_NAME": stream, "ICESTREAM_TABLE": table}
    environment["SPARK_SUBMIT_OPTS"] = variant["java_options"]
    # This process's session set them to its own Python, which a checkout's drain would run its Python workers with.
    python = str(Path(variant["icestream"]).parent / "python")
    environment["PYSPARK_PYTHON"] = environment["PYSPARK_DRIVER_PYTHON"] = python
    command = [variant["icestream"], "ingest", "--available-now",
               "--starting-position", "trim_horizon", *shlex.split(variant["args"])]  # fmt: skip
    began = time.perf_counter()
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)  # fmt: skip
    with TreeSampler(process.pid) as sampler:
        output, _ = process.communicate()
    seconds = time.perf_counter() - began
    if process.returncode != 0:
        raise SystemExit(f"the drain failed ({process.returncode}):\n{output[-3000:]}")
    kinds = sampler.cpu_by_kind()
    return {"seconds": seconds, "cpu_seconds": sum(kinds.values()), "cpu_by_kind": kinds,
            "peak_mib": sampler.peak_mib, "peak_jvm_mib": sampler.peak_jvm_mib}  # fmt: skip


def stored(spark: Any, target: Any) -> int:
    """Rows in the events and rejects tables: what the drain kept of the stream (duplicates dropped)."""
    names = (target.table_name, target.rejects_table_name)
    for name in names:  # another process committed: this session's catalog still holds the empty table
        spark.catalog.refreshTable(name)
    return sum(spark.table(name).count() for name in names)


def measure_size(args: argparse.Namespace, spark: Any, shards: int, records: int, variants: dict[str, dict]) -> dict:
    """Fill one stream with ``records`` on ``shards``; drain it ``runs`` times per variant, alternating."""
    from icestream.config import load_settings
    from icestream.lake.table import setup_tables

    stream = load_settings(stream_name=f"drain-{shards}-{records}-{uuid.uuid4().hex[:6]}", shard_count=shards)
    sent = fill_stream(stream, records, shards, seed=args.seed)
    print(f"{shards} shards, {sent:,} records in the stream", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for number in range(args.runs):
        order = list(variants) if number % 2 == 0 else list(reversed(variants))
        for name in order:
            target = load_settings(stream_name=stream.stream_name, table=f"drain_{uuid.uuid4().hex[:8]}")
            setup_tables(spark, target)
            result = drain(stream.stream_name, target.table, variants[name])
            rows = stored(spark, target)
            result["records"] = sent
            result["records_per_s"] = sent / result["seconds"]
            result["records_per_cpu_s"] = sent / result["cpu_seconds"]
            runs[name].append(result)
            print(f"  {name:>8} run {number + 1}: {result['seconds']:6.1f} s, {result['cpu_seconds']:6.1f} CPU-s "
                  f"({', '.join(f'{k} {v:.1f}' for k, v in sorted(result['cpu_by_kind'].items()))}), "
                  f"{result['records_per_cpu_s']:7.0f} rec/CPU-s, peak {result['peak_mib']:6.0f} MiB "
                  f"(JVM {result['peak_jvm_mib']:.0f}); {rows:,} rows stored", flush=True)  # fmt: skip
    return {"shards": shards, "records": sent, "runs": runs,
            "median": {name: {key: statistics.median(run[key] for run in done) for key in
                              ("seconds", "cpu_seconds", "records_per_s", "records_per_cpu_s", "peak_mib",
                               "peak_jvm_mib")} for name, done in runs.items()}}  # fmt: skip


def margins(sizes: list[dict], variant: str) -> list[dict[str, Any]]:
    """Per shard count with two backlogs: the CPU per record at the margin and each drain's against it."""
    found = []
    for shards in sorted({size["shards"] for size in sizes}):
        same = sorted((size for size in sizes if size["shards"] == shards), key=lambda size: size["records"])
        if len(same) < 2:
            continue
        small, large = same[0]["median"][variant], same[-1]["median"][variant]
        extra_cpu = large["cpu_seconds"] - small["cpu_seconds"]
        marginal_ms = 1000 * extra_cpu / (same[-1]["records"] - same[0]["records"])
        for size in same:
            median = size["median"][variant]
            per_record_ms = 1000 * median["cpu_seconds"] / size["records"]
            found.append({
                "shards": shards, "records": size["records"], "cpu_ms_per_record": per_record_ms,
                "marginal_cpu_ms_per_record": marginal_ms, "ratio_to_marginal": per_record_ms / marginal_ms,
                "fixed_cpu_seconds": median["cpu_seconds"] - marginal_ms * size["records"] / 1000,
                "peak_mib_ratio_to_smallest": median["peak_mib"] / small["peak_mib"],
            })  # fmt: skip
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[4])
    parser.add_argument("--records", type=int, nargs="+", default=[200_000, 600_000])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--variant", default=None, help="the name of a second way to run each drain")
    parser.add_argument("--variant-args", default="", help="its extra icestream ingest arguments")
    parser.add_argument("--variant-java-options", default=None, help="its driver JVM options (SPARK_SUBMIT_OPTS)")
    parser.add_argument("--variant-checkout", type=Path, default=None, help="a set-up clone whose icestream it runs")
    args = parser.parse_args()
    result = banner("backlog drains through icestream ingest --available-now", command_line())
    java_options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    own = str(Path(sys.executable).parent / "icestream")
    variants = {"default": {"args": "", "java_options": java_options, "icestream": own}}
    if args.variant:
        checkout = args.variant_checkout.resolve() / ".venv" / "bin" / "icestream" if args.variant_checkout else None
        variants[args.variant] = {"args": args.variant_args, "java_options": args.variant_java_options or java_options,
                                  "icestream": str(checkout or own)}  # fmt: skip
    with bench_session("drain", spark=True) as (_, spark):
        sizes = [measure_size(args, spark, shards, records, variants) for shards in args.shards
                 for records in args.records]  # fmt: skip
    result.update({"sizes": sizes, "variants": variants, "margins": {name: margins(sizes, name) for name in variants}})
    print("\nmedians (records/s, records per CPU-second, peak MiB of the tree):")
    for size in sizes:
        for name, median in size["median"].items():
            print(f"  {size['shards']:4d} shards {size['records']:>9,} records {name:>8}: "
                  f"{median['records_per_s']:7.0f} rec/s, {median['records_per_cpu_s']:7.0f} rec/CPU-s, "
                  f"{median['peak_mib']:6.0f} MiB")  # fmt: skip
    for name, found in result["margins"].items():
        for margin in found:
            print(f"  {name}: {margin['shards']} shards {margin['records']:,}: "
                  f"{margin['cpu_ms_per_record']:.3f} CPU-ms per record, {margin['ratio_to_marginal']:.1f}x the "
                  f"marginal {margin['marginal_cpu_ms_per_record']:.3f} (fixed {margin['fixed_cpu_seconds']:.1f} "
                  f"CPU-s), peak memory {margin['peak_mib_ratio_to_smallest']:.2f}x the smaller backlog's")  # fmt: skip
    if len(variants) == 2:
        other = list(variants)[1]
        ratios = [size["median"][other]["records_per_cpu_s"] / size["median"]["default"]["records_per_cpu_s"]
                  for size in sizes]  # fmt: skip
        print(f"  {other} / default, records per CPU-second: {shown(summary(ratios))}")
    print(f"results:  {write_results('drain', result)}")


if __name__ == "__main__":
    main()
