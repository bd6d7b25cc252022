"""The reference job (steps 7–9 of the reference design) as a plain ``spark-submit`` script: Spark reads Kinesis itself.

``spark.readStream.format("kinesis")`` → ``from_json(col("data").cast("string"), schema)`` →
``writeStream.format("iceberg").option("checkpointLocation", …).toTable(…)``. Nothing of icestream
but the source is used: the session is Spark's own (``SparkSession.builder``), with the master, the
Iceberg runtime and the catalog given to ``spark-submit``, as any Spark job has them::

    spark-submit --packages org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0 \\
        --conf spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions \\
        --conf spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog --conf spark.sql.catalog.lake.type=... \\
        lib/icestream/jobs/kinesis_to_iceberg.py --stream events --region us-east-1 \\
        --table lake.db.events --checkpoint s3://bucket/checkpoints/events [--available-now]

The table is created by the sink when it does not exist. Malformed records are rows whose parsed
columns are null, with ``data`` kept (``raw``): Spark's ``from_json`` does not fail a batch.
Exactly once rests on Spark's checkpoint (docs/kinesis-source.md: what a lost checkpoint does).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from icestream.jobs.iceberg_sink import add_sink_arguments, event_rows, run_into_table


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kinesis_to_iceberg.py", description=__doc__.split("\n")[0])
    parser.add_argument("--stream", required=True, help="the Kinesis stream")
    parser.add_argument("--region", required=True, help="its AWS region")
    parser.add_argument("--endpoint-url", default="", help="a Kinesis endpoint other than AWS's (an emulator)")
    parser.add_argument("--starting-position", default="latest", help="latest, trim_horizon or at_timestamp:<time>")
    add_sink_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    from icestream.kinesis_source.data_source import register

    args = parse_arguments(argv)
    spark = SparkSession.builder.appName("kinesis-to-iceberg").getOrCreate()
    register(spark)  # spark.dataSource.register(KinesisDataSource), runnable on a cluster's driver too
    reader = (
        spark.readStream.format("kinesis")
        .option("streamName", args.stream)
        .option("regionName", args.region)
        .option("startingPosition", args.starting_position)
    )
    if args.endpoint_url:
        reader = reader.option("endpointUrl", args.endpoint_url)
    events = reader.load()
    rows = event_rows(
        events, payload="data", shard="shardId", sequence="sequenceNumber", arrival="approximateArrivalTimestamp"
    )
    return run_into_table(rows, args, again_until_empty=True)


if __name__ == "__main__":
    sys.exit(main())
