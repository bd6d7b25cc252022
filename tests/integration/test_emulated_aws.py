"""Emulated AWS: moto serves Kinesis, S3, Glue and STS on one loopback port; the aws-shaped set-up runs end to end.

Spark's side (GlueCatalog and S3FileIO, with ``iceberg-aws-bundle``) runs in test_spark_on_glue.py, in
a Spark process of its own. This module runs the rest against the emulator, without Spark:

1. the producer sends generated events to a Kinesis stream (``localstack`` profile → moto);
2. the records are read back (shard, sequence number, arrival time, as the ingest keeps them) and
   written to the events table with pyiceberg's Glue catalog: metadata in Glue, files in S3;
3. the table is read back with notebook 03's non-Spark forms -- the metadata location from Glue,
   pyiceberg's events by type, DuckDB's KPI dashboard over httpfs -- under three configurations:
   ``localstack`` (dummy keys), ``aws`` with the credential chain, ``aws`` assuming a role via STS.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta

import pandas as pd
import pyarrow as pa
import pytest

from icestream.config import Settings, load_settings
from icestream.kinesis.clients import ensure_stream, kinesis_client
from icestream.lake.schema import table_columns
from icestream.producer.put import Producer
from icestream.queries import duckdb_engine as duck
from icestream.queries import pyiceberg_engine as ice
from icestream.runtime import aws, catalog
from icestream.synthetic.generator import backfill_config, generate
from icestream.synthetic.wire import parse_ts
from tests.helpers.moto_server import moto_server
from tests.helpers.streams import read_stream

END = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
BUCKET = "icestream-emulated"
ROLE = "arn:aws:iam::123456789012:role/icestream-reader"
WINDOW_MINUTES = 30.0
BASE_KEYS = {"AWS_ACCESS_KEY_ID": "base-key", "AWS_SECRET_ACCESS_KEY": "base-secret"}

TS = pa.timestamp("us", tz="UTC")
EVENTS_SCHEMA = pa.schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("event_type", pa.string()),
        ("event_ts", TS),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("device_info", pa.struct([("device_type", pa.string()), ("os", pa.string()), ("app_version", pa.string())])),
        ("shard_id", pa.string()),
        ("sequence_number", pa.string()),
        ("partition_key", pa.string()),
        ("arrival_ts", TS),
        ("ingest_ts", TS),
    ]
)


@pytest.fixture(scope="module")
def endpoint():
    """One moto server on loopback for the module, started and stopped here."""
    with moto_server() as address:
        yield address


@pytest.fixture(scope="module")
def aws_environment(endpoint: str):
    """A host's environment: base keys, no named profile, and STS reached at the emulator."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**BASE_KEYS, "AWS_ENDPOINT_URL_STS": endpoint}.items():
            patch.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
            patch.delenv(name, raising=False)
        yield


def localstack_settings(endpoint: str, table: str) -> Settings:
    return load_settings(
        profile="localstack", kinesis_endpoint=endpoint, warehouse=f"s3://{BUCKET}/warehouse", table=table,
        stream_name=f"{table}-stream", shard_count=2,
    )  # fmt: skip


def ingest_rows(records: list[dict]) -> list[dict]:
    """The stream's records (from ``read_stream``) as the ingest's rows: event columns + Kinesis metadata."""
    ingest_ts = datetime.now(UTC)
    rows = []
    for record in records:
        event = json.loads(record["Data"])
        rows.append(
            {
                **{name: event.get(name) for name in ("event_id", "user_id", "session_id", "event_type")},
                "event_ts": parse_ts(event["event_ts"]),
                "properties": event.get("properties") or {},
                "device_info": event.get("device_info"),
                "shard_id": record["shard"],
                "sequence_number": record["SequenceNumber"],
                "partition_key": record["PartitionKey"],
                "arrival_ts": record["ApproximateArrivalTimestamp"],
                "ingest_ts": ingest_ts,
            }
        )
    return rows


@pytest.fixture(scope="module")
def written(endpoint: str, aws_environment):
    """Kinesis → rows → the events table in Glue + S3, in two commits (two ingest batches)."""
    settings = localstack_settings(endpoint, f"aws_{uuid.uuid4().hex[:8]}")
    assert aws.ensure_bucket(settings) == aws.ensure_bucket(settings) == BUCKET  # idempotent, as get_spark calls it
    iam = aws.session(settings).client("iam", endpoint_url=endpoint)
    iam.create_role(RoleName=ROLE.rsplit("/", 1)[1], AssumeRolePolicyDocument="{}")
    ensure_stream(settings)
    config = backfill_config(hours=2, count=1500, end=END, seed=5, bad_rate=0.0, duplicate_rate=0.0)
    records, _ = generate(config)
    summary = Producer(kinesis_client(settings), settings.stream_name, seed=1).send(records, progress=False)
    assert summary.sent == len(records)
    rows = ingest_rows(read_stream(settings))
    assert len(rows) == len(records)

    # Unpartitioned: pyiceberg computes an hours(event_ts) partition on write with pyiceberg-core (Rust),
    # which is not a dependency; Spark's tables are partitioned, and readers prune the same either way.
    glue = ice.glue_catalog(settings)
    glue.create_namespace(settings.namespace)
    table = glue.create_table((settings.namespace, settings.table), schema=EVENTS_SCHEMA)
    half = len(rows) // 2
    for batch in (rows[:half], rows[half:]):
        table.append(pa.Table.from_pylist(batch, schema=EVENTS_SCHEMA))
    return settings, table.refresh(), pd.DataFrame(rows)


def expected_by_type(rows: pd.DataFrame, minutes: float | None) -> pd.DataFrame:
    if minutes is not None:
        end = rows["event_ts"].max()
        rows = rows[(rows["event_ts"] > end - timedelta(minutes=minutes)) & (rows["event_ts"] <= end)]
    counts = rows.groupby("event_type").size().rename("events").reset_index()
    return counts.astype({"events": "int64"}).sort_values("event_type", ignore_index=True)


def sorted_by_type(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[["event_type", "events"]].astype({"events": "int64"}).sort_values("event_type", ignore_index=True)


def reader_settings(kind: str, endpoint: str, written_settings: Settings) -> Settings:
    """The same table seen through the localstack profile, or the aws profile (chain or assumed role)."""
    if kind == "localstack":
        return written_settings
    return load_settings(
        profile="aws", warehouse=written_settings.warehouse, table=written_settings.table,
        s3_endpoint=endpoint, glue_endpoint=endpoint, aws_role_arn=ROLE if kind == "aws-role" else None,
    )  # fmt: skip


def test_the_table_is_in_glue_and_its_files_in_s3(written) -> None:
    settings, table, rows = written
    assert list(EVENTS_SCHEMA.names) == list(table_columns())  # the events table's columns, in order
    glue_table = aws.client(settings, "glue").get_table(DatabaseName=settings.namespace, Name=settings.table)["Table"]
    assert glue_table["Parameters"]["table_type"] == "ICEBERG"
    assert glue_table["StorageDescriptor"]["Location"].startswith(f"s3://{BUCKET}/warehouse/")  # what Athena reads
    listed = aws.client(settings, "s3").list_objects_v2(Bucket=BUCKET, Prefix="warehouse/")["Contents"]
    data_files = [item["Key"] for item in listed if item["Key"].endswith(".parquet")]
    assert len(data_files) == 2  # one per commit
    assert len(table.metadata.snapshots) == 2
    assert rows["event_id"].is_unique


@pytest.mark.parametrize("kind", ["localstack", "aws-chain", "aws-role"])
def test_notebook_03_reads_the_glue_table_with_pyiceberg_and_duckdb(written, endpoint: str, kind: str) -> None:
    written_settings, table, rows = written
    settings = reader_settings(kind, endpoint, written_settings)
    if kind == "aws-role":
        identity = aws.session(settings).client("sts").get_caller_identity()
        assert ":assumed-role/icestream-reader/" in identity["Arn"]
        assert os.environ["AWS_ACCESS_KEY_ID"] == "base-key"  # the role's keys are the session's, not the host's

    location = catalog.current_metadata_location(settings)  # from Glue, as notebook 03 needs it without Spark
    assert location == table.metadata_location
    assert location.startswith(f"s3://{BUCKET}/")

    iceberg_table = ice.open_table(settings)
    assert iceberg_table.metadata.current_snapshot_id == table.metadata.current_snapshot_id
    connection = duck.connect(settings)
    try:
        assert len(duck.snapshots(connection, location)) == 2
        for minutes in (None, WINDOW_MINUTES):
            expected = expected_by_type(rows, minutes)
            assert expected["events"].sum() > 0
            from_pyiceberg = ice.events_by_type(iceberg_table, minutes)
            from_duckdb = duck.kpi_dashboard(connection, location, minutes)
            pd.testing.assert_frame_equal(sorted_by_type(from_pyiceberg), expected)
            pd.testing.assert_frame_equal(sorted_by_type(from_duckdb.by_type), expected)
        totals = duck.kpi_dashboard(connection, location).totals.iloc[0]
    finally:
        connection.close()
    assert (totals["events"], totals["unique_users"]) == (len(rows), rows["user_id"].nunique())
    assert totals["newest_event"] == rows["event_ts"].max()
