"""The reference design's MSK job as a plain Spark job: Spark's own Kafka source into Iceberg's streaming sink.

``spark.readStream.format("kafka")`` → ``from_json(col("value").cast("string"), schema)`` →
``writeStream.format("iceberg").option("checkpointLocation", …).toTable(…)``: what a user writes
instead of icestream, read and parse in the JVM, nothing of icestream in the query. With
``spark-submit`` the session is Spark's own (master, Iceberg runtime, Kafka connector and catalog
given to it, as any Spark job has them)::

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.3,org.apache.iceberg:... \\
        lib/icestream/jobs/kafka_to_iceberg.py --bootstrap b:9092 --topic events \\
        --table lake.db.events --checkpoint s3://bucket/checkpoints/events

``python -m icestream.jobs.kafka_to_iceberg --local ...`` runs the same query in the project's local
session instead (``icestream.get_spark``: its jars, its catalog), as the benchmark and the kill drill
beside icestream run it (``bench/bench_peers.py``, ``tests/reliability/test_crash_peers.py``).

The table is created by the sink when it does not exist (unpartitioned, every column nullable, as
``toTable`` makes it). A malformed record is a row whose parsed columns are null, with ``raw`` kept:
``from_json`` does not fail a batch. Exactly once rests on the checkpoint: Iceberg's sink skips an
epoch the table already holds for this query's id, and a new checkpoint is a new query id
(docs/performance.md: what a kill does, with and without the checkpoint).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

TRIGGER_HELP = "processing-time trigger in seconds (default 1); --available-now reads what is there and stops"


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kafka_to_iceberg.py", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="the Kafka cluster's bootstrap servers")
    parser.add_argument("--topic", required=True, help="the topic")
    parser.add_argument("--starting-offsets", default="earliest", help="earliest or latest (a new checkpoint only)")
    parser.add_argument("--table", required=True, help="the Iceberg table, catalog.namespace.name")
    parser.add_argument("--checkpoint", required=True, help="Spark's checkpoint folder for this query")
    parser.add_argument("--trigger", type=float, default=1.0, help=TRIGGER_HELP)
    parser.add_argument("--available-now", action="store_true", help="read what is there now, then stop")
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: run until stopped)")
    parser.add_argument("--local", action="store_true", help="the project's local session (icestream.get_spark)")
    return parser.parse_args(argv)


def start_query(spark: Any, args: argparse.Namespace) -> Any:
    """Start the job's streaming query in ``spark``; return it (a ``StreamingQuery``)."""
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    from icestream.lake.schema import wire_schema

    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
        .load()
    )
    rows = records.select(
        F.from_json(F.col("value").cast("string"), wire_schema()).alias("event"),
        F.col("value").cast("string").alias("raw"),
        F.col("partition").cast("string").alias("shard_id"),
        F.col("offset").cast("string").alias("sequence_number"),
        F.col("timestamp").alias("arrival_ts"),
    ).select("event.*", "raw", "shard_id", "sequence_number", "arrival_ts")
    writer = rows.writeStream.format("iceberg").option("checkpointLocation", args.checkpoint)
    writer = (
        writer.trigger(availableNow=True)
        if args.available_now
        else writer.trigger(processingTime=f"{args.trigger} seconds")
    )
    return writer.toTable(args.table)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv)
    if args.local:
        from icestream.config import load_settings
        from icestream.runtime.spark import get_spark

        spark = get_spark(load_settings(), app_name="kafka-to-iceberg")
    else:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName("kafka-to-iceberg").getOrCreate()
    query = start_query(spark, args)
    if args.seconds > 0 and not args.available_now:
        query.awaitTermination(args.seconds)
        query.stop()
    else:
        query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
