"""What the two plain Spark jobs share downstream of their source: the event rows, Iceberg's sink, its arguments.

``kinesis_to_iceberg`` and ``kafka_to_iceberg`` differ only in the source they read and the columns
it names; from there each parses the payload with ``from_json`` against the wire schema (a malformed
record keeps its payload in ``raw``, its parsed columns null) and writes with
``writeStream.format("iceberg").option("checkpointLocation", …).toTable(…)``.
"""

from __future__ import annotations

import argparse
from typing import Any

TRIGGER_HELP = "processing-time trigger in seconds (default 1); --available-now reads what is there and stops"


def add_sink_arguments(parser: argparse.ArgumentParser) -> None:
    """The table, the checkpoint and how long the query runs: the arguments both jobs take."""
    parser.add_argument("--table", required=True, help="the Iceberg table, catalog.namespace.name")
    parser.add_argument("--checkpoint", required=True, help="Spark's checkpoint folder for this query")
    parser.add_argument("--trigger", type=float, default=1.0, help=TRIGGER_HELP)
    parser.add_argument("--available-now", action="store_true", help="read what is there now, then stop")
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: run until stopped)")


def event_rows(records: Any, payload: str, shard: str, sequence: str, arrival: str) -> Any:
    """The source's records as the events table's rows: the payload parsed, kept raw, and where it was read."""
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    from icestream.lake.schema import wire_schema

    return records.select(
        F.from_json(F.col(payload).cast("string"), wire_schema()).alias("event"),
        F.col(payload).cast("string").alias("raw"),
        F.col(shard).cast("string").alias("shard_id"),
        F.col(sequence).cast("string").alias("sequence_number"),
        F.col(arrival).alias("arrival_ts"),
    ).select("event.*", "raw", "shard_id", "sequence_number", "arrival_ts")


def run_into_table(rows: Any, args: argparse.Namespace, *, again_until_empty: bool = False) -> int:
    """Write ``rows`` into ``args.table`` with Iceberg's sink and the checkpoint; return once the query ends.

    With ``--available-now`` the query reads what is there and stops; ``again_until_empty`` starts it
    again until a run reads nothing (Spark 4.1 runs an availableNow query over a Python source as one
    batch, which the Kinesis source bounds per shard). With ``--seconds`` it is stopped after that long.
    """
    writer = rows.writeStream.format("iceberg").option("checkpointLocation", args.checkpoint)
    if args.available_now:
        while True:
            query = writer.trigger(availableNow=True).toTable(args.table)
            query.awaitTermination()
            if not again_until_empty or not query.lastProgress or not query.lastProgress["numInputRows"]:
                return 0
    query = writer.trigger(processingTime=f"{args.trigger} seconds").toTable(args.table)
    if args.seconds > 0:
        query.awaitTermination(args.seconds)
        query.stop()
    else:
        query.awaitTermination()
    return 0
