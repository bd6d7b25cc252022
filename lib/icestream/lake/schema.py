"""The event schema: the base of the whole project (later work extends it, never replaces it).

On the wire an event is one UTF-8 JSON object per Kinesis record::

    {"event_id": "6f1c...", "user_id": "u-0042", "session_id": "s-...", "event_type": "click",
     "event_ts": "2026-11-21T05:00:00.123Z", "properties": {"page": "/home"},
     "device_info": {"device_type": "mobile", "os": "iOS", "app_version": "5.2.1"}}

``event_ts`` is ISO-8601 with a UTC offset or ``Z``; ``properties`` values are strings. The table
adds the ingest metadata columns (where in Kinesis the record was, and when it arrived).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from icestream.runtime.handles import jvm as jvm_of

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import StructField, StructType


def try_cast(column: Column, type_name: str) -> Column:
    """``column`` as ``type_name``, null where a value does not fit (never an error).

    Spark 4 runs ANSI SQL by default, where ``cast`` fails the query on one malformed value; its
    ``try_cast`` keeps Spark 3.5's null. pyspark 3.5's Column has no ``try_cast``, and its
    (non-ANSI) ``cast`` already gives null.
    """
    # Asked of the class: a Column's own attribute lookup answers any name with a struct field.
    if hasattr(type(column), "try_cast"):
        return column.try_cast(type_name)
    return column.cast(type_name)


REQUIRED_FIELDS = ("event_id", "event_type", "event_ts", "user_id")
DEVICE_FIELDS = ("device_type", "os", "app_version")
METADATA_COLUMNS = ("shard_id", "sequence_number", "partition_key", "arrival_ts", "ingest_ts")

# Event columns as Spark SQL DDL, in table order.
EVENT_COLUMNS_DDL = (
    "event_id STRING NOT NULL COMMENT 'UUID assigned by the producer; the deduplication key'",
    "user_id STRING COMMENT 'Kinesis partition key: per-user order holds within a shard'",
    "session_id STRING",
    "event_type STRING",
    "event_ts TIMESTAMP COMMENT 'When the event happened (UTC); partition source'",
    "properties MAP<STRING, STRING> COMMENT 'Type-specific fields; unknown top-level fields are kept here'",
    "device_info STRUCT<device_type: STRING, os: STRING, app_version: STRING>",
)
METADATA_COLUMNS_DDL = (
    "shard_id STRING COMMENT 'Kinesis shard the record was read from'",
    "sequence_number STRING COMMENT 'Kinesis sequence number within the shard'",
    "partition_key STRING",
    "arrival_ts TIMESTAMP COMMENT 'Kinesis ApproximateArrivalTimestamp'",
    "ingest_ts TIMESTAMP COMMENT 'When the ingest began reading the batch that wrote the row'",
)
REJECT_COLUMNS_DDL = (
    "raw_data BINARY COMMENT 'The record payload exactly as read from Kinesis'",
    "raw_text STRING COMMENT 'The payload decoded as UTF-8 with replacement characters, for reading'",
    "reason STRING COMMENT 'Why the record was rejected (a short code)'",
    "detail STRING COMMENT 'Details of the failure'",
    "batch_id BIGINT COMMENT 'Ingest batch that rejected it'",
    *METADATA_COLUMNS_DDL,
)
# The raw archive (optional): each Kinesis record as received, partitioned by day of arrival.
ARCHIVE_COLUMNS_DDL = (
    "data BINARY COMMENT 'The record data exactly as read from Kinesis'",
    "shard_id STRING COMMENT 'Kinesis shard the record was read from'",
    "sequence_number STRING COMMENT 'Kinesis sequence number within the shard'",
    "partition_key STRING",
    "arrival_ts TIMESTAMP COMMENT 'Kinesis ApproximateArrivalTimestamp; partition source'",
    "ingest_ts TIMESTAMP COMMENT 'When the ingest began reading the batch that archived it'",
    "batch_id BIGINT COMMENT 'Ingest batch that archived it'",
)


def wire_schema() -> StructType:
    """The JSON payload schema used to parse records (explicit, never inferred).

    ``event_ts`` stays a string here so that an unparseable timestamp can be told apart from a
    missing one and rejected with its own reason.
    """
    from pyspark.sql.types import MapType, StringType, StructField, StructType

    device = StructType([StructField(name, StringType()) for name in DEVICE_FIELDS])
    return StructType(
        [
            StructField("event_id", StringType()),
            StructField("user_id", StringType()),
            StructField("session_id", StringType()),
            StructField("event_type", StringType()),
            StructField("event_ts", StringType()),
            StructField("properties", MapType(StringType(), StringType())),
            StructField("device_info", device),
        ]
    )


def event_columns() -> tuple[str, ...]:
    """Names of the event columns, in table order."""
    return tuple(column.split()[0] for column in EVENT_COLUMNS_DDL)


def table_columns() -> tuple[str, ...]:
    """Names of all columns of the events table, in order."""
    return event_columns() + METADATA_COLUMNS


def spark_fields(spark: SparkSession, schema: Any) -> list[StructField]:
    """The Spark columns of an Iceberg ``Schema`` (Java), converted the way Iceberg's Spark tables do."""
    from pyspark.sql.types import StructType

    converted = jvm_of(spark).org.apache.iceberg.spark.SparkSchemaUtil.convert(schema)
    return list(StructType.fromJson(json.loads(converted.json())).fields)
