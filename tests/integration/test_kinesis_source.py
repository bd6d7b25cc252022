"""The kinesis source on the emulator: the reference job's shape from a notebook's session and from ``spark-submit``.

The session's form is what a notebook cell types: ``readStream.format("kinesis")`` → ``from_json``
→ ``writeStream.format("iceberg")`` with a checkpoint. The ``spark-submit`` form runs
``icestream/jobs/kinesis_to_iceberg.py`` in a JVM of its own, with Spark's own session, the Iceberg
runtime and the catalog given on its command line. Each is checked against a bare boto3 read of
the stream: every user record once (KPL aggregates expanded), malformed payloads kept as rows whose
parsed columns are null.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from icestream.config import Settings, load_settings
from icestream.kinesis.clients import ensure_stream, kinesis_connection
from icestream.kinesis_source.data_source import register
from tests.helpers.streams import mixed_records, put, send_aggregated, stream_user_records
from tests.helpers.streams import user_records as kpl_records

JOB = Path(__file__).resolve().parents[2] / "lib" / "icestream" / "jobs" / "kinesis_to_iceberg.py"


@pytest.fixture
def stream(emulator: str) -> Settings:
    settings = load_settings(stream_name=f"src-{uuid.uuid4().hex[:8]}")
    ensure_stream(settings, shard_count=2)
    records, _, _ = mixed_records(0, 150)
    put(settings, records)
    send_aggregated(settings, kpl_records(1_000, 20), per_aggregate=5)
    return settings


def test_the_reference_job_in_a_session_reads_every_user_record_once(spark, stream: Settings, tmp_path: Path) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    register(spark)
    endpoint = kinesis_connection(stream).endpoint
    table = f"{stream.catalog}.{stream.namespace}.src_{stream.stream_name[-8:]}"
    events = (
        spark.readStream.format("kinesis")
        .option("streamName", stream.stream_name)
        .option("regionName", stream.region)
        .option("endpointUrl", endpoint)
        .option("startingPosition", "trim_horizon")
        .load()
    )
    assert [(field.name, field.dataType.simpleString()) for field in events.schema] == [
        ("data", "binary"), ("streamName", "string"), ("shardId", "string"), ("partitionKey", "string"),
        ("sequenceNumber", "string"), ("subSequenceNumber", "bigint"), ("approximateArrivalTimestamp", "timestamp"),
    ]  # fmt: skip
    parsed = events.select(
        F.from_json(F.col("data").cast("string"), "event_id STRING, user_id STRING").alias("event"),
        F.col("data").cast("string").alias("raw"),
        "shardId", "sequenceNumber", "subSequenceNumber", "partitionKey", "approximateArrivalTimestamp", "streamName",
    ).select("event.*", "*")  # fmt: skip
    query = (
        parsed.drop("event")
        .writeStream.format("iceberg")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)  # on Spark 4.1: one batch, up to maxFetchRecordsPerShard (10,000) per shard
        .toTable(table)
    )
    query.awaitTermination()
    assert query.exception() is None
    progress = query.lastProgress
    rows = spark.table(table).collect()
    written = Counter((row.shardId, row.sequenceNumber, row.subSequenceNumber) for row in rows)
    assert written == stream_user_records(stream)
    assert progress["numInputRows"] == len(rows)
    malformed = [row for row in rows if row.event_id is None]
    assert malformed
    assert all(row.raw.startswith('{"event_id": "broken') for row in malformed)
    assert {row.subSequenceNumber for row in rows} >= set(range(5))  # the aggregates of five, expanded
    assert all(row.streamName == stream.stream_name and row.approximateArrivalTimestamp for row in rows)


def test_a_bad_option_stops_the_query_with_one_line_naming_the_accepted_ones(spark, emulator: str) -> None:
    register(spark)
    with pytest.raises(Exception, match="the kinesis source has no option 'streamname2'; it accepts streamName"):
        spark.readStream.format("kinesis").option("streamName2", "x").option("regionName", "us-east-1").load()
