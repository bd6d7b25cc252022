"""Change data: a MERGE per batch against an append of the same rows; copy-on-write against merge-on-read; reads
before and after compaction. All in one run.

One 2-shard stream is filled once with an entity stream of order changes
(:func:`icestream.synthetic.entities.order_changes`: creates, updates, deletes, late and replayed changes,
a few malformed). The whole stream is then drained by the change ingest into a fresh table per
drain, in batches of about ``--batch-records`` changes, in the order warm-up (not counted), then
``append``, ``merge-on-read``, ``copy-on-write``, ``copy-on-write``, ``merge-on-read``, ``append``:
an ABBA order, so a steady drift of the machine or the JIT falls on every mode alike. ``append`` is
the baseline: the same read, parse and checks, the same typed rows, but appended (a changelog)
instead of folded and merged, so the difference is the fold and the ``MERGE``.

Measured per drain: wall seconds and the CPU seconds of this process tree (Python, its JVM and
Spark's Python workers, from ``/proc``), as changes per core-second. Reported: each mode's median
over its two drains, and its ratio to ``append``.

Then, on the second merge-on-read table: the read of the live rows (``count`` and ``sum(amount)``
``WHERE NOT is_deleted``) in Spark and in DuckDB, ``--reads`` times each, before and after
``icestream maintain``'s compaction (which applies the delete files); and the delete files and
rows they delete before and after.

Run: ``.venv/bin/python bench/bench_changes.py [--changes 40000] [--batch-records 2000]`` (about 4 minutes).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, bench_session, command_line, new_table_settings, shown, summary, tree_cpu, write_results

DRAINS = ("append", "merge-on-read", "copy-on-write", "copy-on-write", "merge-on-read", "append")


def cpu_seconds() -> float:
    """CPU seconds (user + system) this process tree has used so far."""
    return sum(cpu for _, cpu in tree_cpu(os.getpid()).values())


def appending(spark: Any, table: str, rows: Any, spec: Any, properties: dict[str, str]) -> None:
    """The baseline in place of ``apply_changes``: the same typed rows appended to a changelog table."""
    from icestream.ingest.changes import typed_changes

    if not spark.catalog.tableExists(table + "_log"):
        typed_changes(rows, spec).drop("ordinal").limit(0).writeTo(table + "_log").using("iceberg").create()
    options = {f"snapshot-property.{key}": value for key, value in properties.items()}
    typed_changes(rows, spec).drop("ordinal").writeTo(table + "_log").options(**options).append()


def drain(spark: Any, stream_name: str, mode: str, spec: Any, per_shard: int) -> dict[str, Any]:
    """Drain the stream into a fresh table as ``mode``; wall and CPU seconds, changes and batches."""
    from icestream import start_ingest
    from icestream.ingest import changes, commits

    settings = new_table_settings(stream_name, prefix="cdc")
    if mode != "append":
        settings = dataclasses.replace(settings, changes_mode=mode)
    original = commits.apply_changes  # what one table's commit calls (ingest.commits.TableWriter)
    commits.apply_changes = appending if mode == "append" else changes.apply_changes
    try:
        began, cpu0 = time.perf_counter(), cpu_seconds()
        query = start_ingest(spark, settings, available_now=True, trigger_seconds=0, changes=spec,
                             max_records_per_shard=per_shard)  # fmt: skip
        query.await_termination()
        wall, cpu = time.perf_counter() - began, cpu_seconds() - cpu0
    finally:
        commits.apply_changes = original
    assert query.exception() is None, query.exception()
    progress = list(query.recent_progress)
    taken = sum(batch["written"] for batch in progress)
    return {"mode": mode, "table": settings.table_name, "seconds": round(wall, 2), "cpu_s": round(cpu, 2),
            "changes": taken, "batches": len(progress), "per_core_s": round(taken / cpu, 1)}  # fmt: skip


def reads(spark: Any, table: str, count: int) -> dict[str, Any]:
    """Seconds to read the live rows in Spark and DuckDB, ``count`` times each; delete files and rows."""
    from icestream.lake import LakeTable
    from icestream.queries import duckdb_engine as duck
    from icestream.queries.health import collect_stats

    sql = "SELECT count(*), sum(amount) FROM {} WHERE NOT is_deleted"
    spark.catalog.refreshTable(table)
    spark_times, duck_times, answers = [], [], set()
    for _ in range(count):
        began = time.perf_counter()
        live, amount = spark.sql(sql.format(table)).first()
        answers.add((live, round(amount, 2)))  # a sum of doubles varies in its last bits with the task order
        spark_times.append(time.perf_counter() - began)
    lake_table = LakeTable(spark, table)
    location, _ = lake_table.inspect.metadata_location()
    connection = duck.connect()
    try:
        for _ in range(count):
            began = time.perf_counter()
            total = connection.execute(sql.format(f"iceberg_scan('{location}')")).fetchone()
            duck_times.append(time.perf_counter() - began)
    finally:
        connection.close()
    stats = collect_stats(lake_table)
    live, amount = answers.pop()
    assert not answers, "Spark answered differently across reads"
    assert total[0] == live, (total, live)
    assert abs(total[1] - amount) <= 1e-6 * max(1.0, abs(amount)), (total, amount)
    return {"spark_s": summary(spark_times), "duckdb_s": summary(duck_times), "live_rows": live,
            "delete_files": stats.delete_files, "deleted_rows": stats.deleted_rows}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=40_000)
    parser.add_argument("--orders", type=int, default=5_000)
    parser.add_argument("--batch-records", type=int, default=2_000)
    parser.add_argument("--reads", type=int, default=5)
    args = parser.parse_args()
    facts = banner("change data: MERGE vs append, copy-on-write vs merge-on-read", command_line())
    with bench_session("changes", shards=2) as (settings, spark):
        from icestream.ingest.changes import ChangeSpec
        from icestream.kinesis.clients import ensure_stream, kinesis_client
        from icestream.lake import LakeTable
        from icestream.lake.routine import MaintenancePlan, run_maintenance
        from icestream.synthetic.entities import ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER, order_changes

        ensure_stream(settings, shard_count=2)
        stream = order_changes(orders=args.orders, changes=args.changes, seed=7)
        client = kinesis_client(settings)
        for start in range(0, len(stream.records), 500):
            chunk = stream.records[start : start + 500]
            client.put_records(StreamName=settings.stream_name,
                               Records=[{"Data": data, "PartitionKey": key} for data, key in chunk])  # fmt: skip
        spec = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER)
        per_shard = args.batch_records // 2
        print(f"stream: {len(stream.records)} records ({dict(stream.sent)}), {len(stream.truth)} live orders")
        warmup = drain(spark, settings.stream_name, "merge-on-read", spec, per_shard)
        print(f"warm-up: {warmup}")
        drains = []
        for mode in DRAINS:
            drains.append(drain(spark, settings.stream_name, mode, spec, per_shard))
            print(f"  {drains[-1]}", flush=True)
        modes: dict[str, Any] = {}
        for mode in dict.fromkeys(DRAINS):
            mine = [run for run in drains if run["mode"] == mode]
            modes[mode] = {"per_core_s": statistics.median(run["per_core_s"] for run in mine),
                           "seconds": statistics.median(run["seconds"] for run in mine)}  # fmt: skip
        for mode, figures in modes.items():
            figures["per_core_s_vs_append"] = round(figures["per_core_s"] / modes["append"]["per_core_s"], 3)
            figures["seconds_vs_append"] = round(figures["seconds"] / modes["append"]["seconds"], 3)
            print(f"{mode:>14}: {figures['per_core_s']:.0f} changes per core-second "
                  f"({figures['per_core_s_vs_append']:.2f}x append), {figures['seconds']:.1f} s "
                  f"({figures['seconds_vs_append']:.2f}x)")  # fmt: skip
        merged = [run for run in drains if run["mode"] == "merge-on-read"][-1]["table"]
        before = reads(spark, merged, args.reads)
        (compaction,) = run_maintenance(LakeTable(spark, merged), MaintenancePlan.scheduled(None, steps=("compact",)))
        assert compaction.ok, compaction.line()
        after = reads(spark, merged, args.reads)
        assert after["live_rows"] == before["live_rows"] == len(stream.truth)
        for label, figures in (("before compaction", before), ("after compaction", after)):
            print(f"{label:>18}: Spark {shown(figures['spark_s'], ' s', 3)}; "
                  f"DuckDB {shown(figures['duckdb_s'], ' s', 3)}; {figures['delete_files']} delete files, "
                  f"{figures['deleted_rows']} rows deleted")  # fmt: skip
        ratio = {engine: round(after[f"{engine}_s"]["median"] / before[f"{engine}_s"]["median"], 3)
                 for engine in ("spark", "duckdb")}  # fmt: skip
        print(f"read after / before compaction: {ratio}")
    results = {"before": before, "after": after, "after_vs_before": ratio}
    write_results("changes", {"machine": facts, "command": command_line(), "args": vars(args),
                              "stream": dict(stream.sent), "warmup": warmup, "drains": drains, "modes": modes,
                              "reads": results})  # fmt: skip


if __name__ == "__main__":
    main()
