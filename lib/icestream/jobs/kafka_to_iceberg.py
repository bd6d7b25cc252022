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

from icestream.jobs.iceberg_sink import add_sink_arguments, event_rows, run_into_table


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kafka_to_iceberg.py", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="the Kafka cluster's bootstrap servers")
    parser.add_argument("--topic", required=True, help="the topic")
    parser.add_argument("--starting-offsets", default="earliest", help="earliest or latest (a new checkpoint only)")
    add_sink_arguments(parser)
    parser.add_argument("--local", action="store_true", help="the project's local session (icestream.get_spark)")
    return parser.parse_args(argv)


def start_rows(spark: Any, args: argparse.Namespace) -> Any:
    """The job's streaming rows in ``spark``: Spark's Kafka source, the payload parsed (a DataFrame)."""
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
        .load()
    )
    return event_rows(records, payload="value", shard="partition", sequence="offset", arrival="timestamp")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv)
    if args.local:
        from icestream.config import load_settings
        from icestream.runtime.spark import get_spark

        spark = get_spark(load_settings(), app_name="kafka-to-iceberg")
    else:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName("kafka-to-iceberg").getOrCreate()
    return run_into_table(start_rows(spark, args), args)


if __name__ == "__main__":
    sys.exit(main())
