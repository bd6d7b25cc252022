"""What an events table's write costs under different Parquet properties, in one run, alternating.

The same rows -- generated events as the events table holds them, with the Kinesis columns filled
the way the ingest fills them (a shard id, a 56-digit sequence number, the partition key, the
arrival time) -- are appended to fresh events tables created by the project's own statement
(``icestream.lake.ddl.create_table_statement``) with each variant's properties on top of the
project's, without a shuffle (as the ingest appends). Reported per variant: the JVM's core-seconds
per append (psutil, the process's user + system time: the write runs in the driver's JVM in local
mode), the median and its ratio to the first variant's median, and the bytes and files written.

The first variant is Iceberg's own dictionary size (2 MiB), the second the project's properties as
they are; the others are candidates. Parquet writes each column chunk with a dictionary until the
dictionary passes ``write.parquet.dict-size-bytes``, and at the end of its first page (20,000 rows)
keeps it only if it made the page smaller: a column of unique values (``event_id``,
``sequence_number``) is dictionary-encoded, then written again plainly, for up to a page of rows in
every file a batch writes.

Run: ``.venv/bin/python bench/bench_write_properties.py`` (about 3 minutes; ``--help`` for sizes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import SCRATCH, banner, bench_session, command_line, line_records, summary, write_results

MIB = 1024 * 1024
VARIANTS: dict[str, dict[str, str]] = {
    "iceberg's dictionary size (2 MiB)": {"write.parquet.dict-size-bytes": str(2 * MIB)},
    "the project's properties": {},
    "dictionary 128 KiB": {"write.parquet.dict-size-bytes": str(128 * 1024)},
    "no dictionary": {"parquet.enable.dictionary": "false"},
}


def event_rows(spark: Any, records: int, seed: int) -> Any:
    """Generated events with the Kinesis columns filled, kept in memory (``localCheckpoint``)."""
    from pyspark.sql import functions as F  # noqa: N812

    from icestream.lake.schema import wire_schema

    payloads = SCRATCH / "write_properties" / "payloads.jsonl"
    payloads.parent.mkdir(parents=True, exist_ok=True)
    payloads.write_bytes(b"".join(record.data + b"\n" for record in line_records(records, seed)))
    frame = spark.read.schema(wire_schema()).json(str(payloads)).where(F.col("event_id").isNotNull())
    number = F.monotonically_increasing_id()
    return frame.select(
        "event_id", "user_id", "session_id", "event_type", F.to_timestamp("event_ts").alias("event_ts"),
        "properties", "device_info",
        F.concat(F.lit("shardId-00000000000"), F.pmod(F.hash("user_id"), F.lit(4)).cast("string")).alias("shard_id"),
        F.concat(F.lit("4965"), F.lpad(number.cast("string"), 52, "0")).alias("sequence_number"),
        F.col("user_id").alias("partition_key"), F.to_timestamp("event_ts").alias("arrival_ts"),
        F.current_timestamp().alias("ingest_ts"),
    ).localCheckpoint(eager=True)  # fmt: skip


def append(spark: Any, rows: Any, table: str, properties: dict[str, str]) -> None:
    from icestream.lake.ddl import EVENTS_PARTITIONING, create_table_statement
    from icestream.lake.schema import EVENT_COLUMNS_DDL, METADATA_COLUMNS_DDL

    statement = create_table_statement(table, EVENT_COLUMNS_DDL + METADATA_COLUMNS_DDL, EVENTS_PARTITIONING,
                                       "bench_write_properties", properties)  # fmt: skip
    statement.run(spark)
    rows.writeTo(table).option("distribution-mode", "none").append()


def main() -> None:
    import psutil

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="generated records (a few are invalid)")
    parser.add_argument("--rounds", type=int, default=5, help="measured appends of each variant")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured rounds first (the JIT settles slowly)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    facts = banner("an events table's append under Parquet properties", command_line())
    with bench_session("write_properties") as (settings, spark):
        rows = event_rows(spark, args.records, args.seed)
        count = rows.count()
        jvm = psutil.Process(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))
        namespace = f"{settings.catalog}.{settings.namespace}"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        print(f"{count:,} rows per append, {len(VARIANTS)} variants, {args.rounds} rounds after {args.warmup}",
              flush=True)  # fmt: skip
        cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
        written: dict[str, tuple[int, int]] = {}
        for number in range(args.warmup + args.rounds):
            names = list(VARIANTS) if number % 2 == 0 else list(reversed(VARIANTS))
            for index, name in enumerate(names):
                table = f"{namespace}.write_{number}_{index}"
                before = sum(jvm.cpu_times()[:2])
                append(spark, rows, table, VARIANTS[name])
                used = sum(jvm.cpu_times()[:2]) - before
                files = spark.sql(f"SELECT file_size_in_bytes FROM {table}.files").collect()
                written[name] = (sum(row.file_size_in_bytes for row in files), len(files))
                if number >= args.warmup:
                    cpu[name].append(used)
                print(f"round {number + 1}{' (warm-up)' if number < args.warmup else ''}: {name}: {used:.2f} core-s, "
                      f"{written[name][0]:,} bytes in {written[name][1]} files", flush=True)  # fmt: skip
        baseline = statistics.median(cpu[next(iter(VARIANTS))])
        results = {}
        for name, values in cpu.items():
            results[name] = {
                "properties": VARIANTS[name],
                "jvm_core_seconds": summary(values),
                "ratio_to_first": statistics.median(values) / baseline,
                "bytes": written[name][0],
                "files": written[name][1],
            }
            middle = statistics.median(values)
            print(f"{name:36s} median {middle:.2f} core-s ({middle / baseline:.2f} of the first), "
                  f"{written[name][0]:,} bytes")  # fmt: skip
    write_results("write_properties", {"machine": facts, "command": command_line(), "rows": count,
                                        "cpu_count": os.cpu_count(), "variants": results})  # fmt: skip


if __name__ == "__main__":
    main()
