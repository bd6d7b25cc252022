"""The reference job's shape as a real OS process, for the source's crash campaign.

``python tests/reliability/source_runner.py`` runs ``spark.readStream.format("kinesis")`` →
``from_json`` → a sink, with Spark's checkpoint in ``RELIABILITY_CHECKPOINT``, until the table
holds ``RELIABILITY_EXPECTED`` rows (or ``RELIABILITY_DURATION`` seconds pass). The stream and the
table come from ``ICESTREAM_*`` as for ``icestream ingest``. ``RELIABILITY_SINK``:

- ``iceberg``: ``writeStream.format("iceberg").toTable(...)``, Iceberg's own streaming sink (it skips
  an epoch it has committed by the query's id and the epoch's);
- ``positioned``: ``foreachBatch`` with :class:`icestream.kinesis_source.positioned.PositionedAppend`
  (positions in the table's snapshots; it survives a lost checkpoint).

``RELIABILITY_TRIGGER`` is ``processing`` (0.5 s) or ``available_now`` (on Spark 4.1 one batch per
query for a Python source, so queries are started one after another until the rows are there, as
a scheduled job would run). The source's crash drill (``ICESTREAM_SOURCE_CRASH``) kills this
process's group, which it is made the leader of by :func:`running`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

PAYLOAD_SCHEMA = "event_id STRING, user_id STRING, properties MAP<STRING, STRING>"
TABLE_DDL = "event_id STRING, user_id STRING, n STRING, shard_id STRING, sequence_number STRING, sub BIGINT, raw STRING"


def running(env: dict[str, str], log: Path) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """This runner as its own process group (Python and its JVM), output to ``log``; SIGKILLed with it on leaving."""
    from tests.helpers.crash import process_group  # the test's process imports this; the script never calls it

    return process_group([sys.executable, __file__], env, log)


def main() -> int:
    from pyspark.sql import functions as F  # noqa: N812

    import icestream
    from icestream.config import load_settings
    from icestream.kinesis.clients import kinesis_connection

    os.environ["ICESTREAM_SOURCE_CRASH_GROUP"] = str(os.getpgrp())  # before the JVM starts: its workers inherit it
    settings = load_settings()
    spark = icestream.get_spark(settings, app_name="icestream-source-crash")
    table = f"{settings.catalog}.{settings.namespace}.{settings.table}"
    connection = kinesis_connection(settings)
    expected = int(os.environ["RELIABILITY_EXPECTED"])
    deadline = time.monotonic() + float(os.environ.get("RELIABILITY_DURATION", "150"))
    sink = os.environ.get("RELIABILITY_SINK", "iceberg")
    available_now = os.environ.get("RELIABILITY_TRIGGER") == "available_now"
    starting = os.environ.get("RELIABILITY_STARTING", "trim_horizon")
    if starting == "table":
        from icestream.kinesis_source.positioned import starting_positions

        starting = starting_positions(spark, table, settings.stream_name)

    def start() -> object:
        events = (
            spark.readStream.format("kinesis")
            .option("streamName", settings.stream_name)
            .option("regionName", connection.region)
            .option("endpointUrl", connection.endpoint or "")
            .option("startingPosition", starting)
            .option("maxFetchRecordsPerShard", os.environ.get("RELIABILITY_MAX_RECORDS", "15"))
            .load()
        )
        rows = events.select(
            F.from_json(F.col("data").cast("string"), PAYLOAD_SCHEMA).alias("event"),
            F.col("shardId").alias("shard_id"),
            F.col("sequenceNumber").alias("sequence_number"),
            F.col("subSequenceNumber").alias("sub"),
            F.col("data").cast("string").alias("raw"),
        ).select(
            "event.event_id", "event.user_id", F.col("event.properties").getItem("n").alias("n"),
            "shard_id", "sequence_number", "sub", "raw",
        )  # fmt: skip
        writer = rows.writeStream.option("checkpointLocation", os.environ["RELIABILITY_CHECKPOINT"])
        writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="0.5 seconds")
        if sink == "positioned":
            from icestream.kinesis_source.positioned import PositionedAppend

            return writer.foreachBatch(PositionedAppend(table, settings.stream_name)).start()
        return writer.format("iceberg").toTable(table)

    query = start()
    done = False
    while time.monotonic() < deadline:
        if available_now:
            query.awaitTermination()  # type: ignore[attr-defined]
        else:
            time.sleep(0.5)
            if query.exception() is not None:  # type: ignore[attr-defined]
                raise query.exception()  # type: ignore[attr-defined]
        spark.sql(f"REFRESH TABLE {table}")  # foreachBatch writes through the query's own session and its catalog
        if spark.table(table).count() >= expected:
            done = True
            break
        if available_now:
            query = start()
    with contextlib.suppress(Exception):
        query.stop()  # type: ignore[attr-defined]
    if not done:
        print(f"the table did not reach {expected} rows in time", flush=True)
    return 0 if done else 3


if __name__ == "__main__":
    sys.exit(main())
