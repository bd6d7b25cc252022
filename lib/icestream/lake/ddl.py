"""Create and describe the Iceberg tables (idempotent).

The events table is partitioned by ``hours(event_ts)``, a hidden partition: queries filter on
``event_ts`` itself and Iceberg prunes files, with no string date column to keep in sync.
Hours rather than days because the workbook's questions are about the last minutes and hours:
an hourly partition lets a "last 15 minutes" query open one or two partitions, and compaction works
on hour-sized units while the stream keeps writing the current hour. A stream of a few events per
second would be better served by ``days(event_ts)``; this is a one-line change here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.lake.schema import ARCHIVE_COLUMNS_DDL, EVENT_COLUMNS_DDL, METADATA_COLUMNS_DDL, REJECT_COLUMNS_DDL
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

# Why each property: streaming commits every few seconds, so metadata files would pile up without
# the first two; compaction may commit while the ingest does, so commits retry more than the default.
TABLE_PROPERTIES = {
    "format-version": "2",
    "write.format.default": "parquet",
    "write.parquet.compression-codec": "zstd",
    # Cluster each batch by partition (one file per hour touched, not one per shard and hour) and
    # use fanout writers, which keep a file open per partition instead of sorting rows first.
    "write.distribution-mode": "hash",
    "write.spark.fanout.enabled": "true",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "100",
    "commit.retry.num-retries": "10",
    "write.target-file-size-bytes": str(128 * 1024 * 1024),
}


def qualified_name(*parts: str) -> str:
    """Join validated identifiers into a dotted name (the one way table names reach SQL)."""
    return ".".join(validate_identifier(part, "table name part") for part in parts)


def checked_table_name(name: str) -> str:
    """Validate a dotted table name (``catalog.namespace.table``) part by part.

    Args:
        name: The table name as text.

    Returns:
        The same name, every part checked by :func:`icestream.validation.validate_identifier`.

    Raises:
        ConfigError: If a part is not an identifier, or the name has no catalog part.
    """
    if not isinstance(name, str) or "." not in name:
        raise ConfigError(f"table {name!r}: give a qualified name such as lake.streaming_analytics.user_events.")
    return qualified_name(*name.split("."))


def _ensure_properties(spark: SparkSession, name: str) -> None:
    """Apply TABLE_PROPERTIES to a table that already existed (idempotent; format-version stays)."""
    current = {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    wanted = {key: value for key, value in TABLE_PROPERTIES.items() if key != "format-version"}
    if any(current.get(key) != value for key, value in wanted.items()):
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({_properties_sql(wanted)})")


def _properties_sql(properties: dict[str, str]) -> str:
    # Keys and values are our own constants above, never user input.
    return ", ".join(f"'{key}'='{value}'" for key, value in properties.items())


def _create_table(spark: SparkSession, name: str, columns: tuple[str, ...], partitioning: str, comment: str) -> str:
    """``CREATE TABLE IF NOT EXISTS`` with the project's properties, then those properties on an older table."""
    body = ",\n  ".join(columns)
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {name} (\n  {body}\n) USING iceberg\n"
        f"PARTITIONED BY ({partitioning})\n"
        f"COMMENT '{comment}'\n"
        f"TBLPROPERTIES ({_properties_sql(TABLE_PROPERTIES)})"
    )
    _ensure_properties(spark, name)
    return name


def create_namespace(spark: SparkSession, settings: Settings) -> str:
    """Create the namespace unless it exists; return its qualified name."""
    name = qualified_name(settings.catalog, settings.namespace)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}")
    return name


def create_events_table(spark: SparkSession, settings: Settings) -> str:
    """Create the events table unless it exists; return its qualified name."""
    name = checked_table_name(settings.table_name)
    return _create_table(
        spark,
        name,
        EVENT_COLUMNS_DDL + METADATA_COLUMNS_DDL,
        "hours(event_ts)",
        f"User events streamed from Kinesis stream {settings.stream_name}",
    )


def create_rejects_table(spark: SparkSession, settings: Settings) -> str:
    """Create the table of rejected records unless it exists; return its qualified name.

    Rejects are few and read by ingest time (what went wrong recently), so they are partitioned by
    ``days(ingest_ts)``.
    """
    name = checked_table_name(settings.rejects_table_name)
    return _create_table(
        spark,
        name,
        REJECT_COLUMNS_DDL,
        "days(ingest_ts)",
        f"Records from {settings.stream_name} the ingest could not accept, with the reason",
    )


def create_archive_table(spark: SparkSession, settings: Settings) -> str:
    """Create the raw archive unless it exists; return its qualified name.

    It is read by arrival day (replay a day, drop days past retention), so it is partitioned by
    ``days(arrival_ts)``: expiring a day is a metadata-only delete of whole files.
    """
    name = checked_table_name(settings.archive_table_name)
    return _create_table(
        spark,
        name,
        ARCHIVE_COLUMNS_DDL,
        "days(arrival_ts)",
        f"Every record of {settings.stream_name} as received (the raw archive)",
    )


def setup_tables(spark: SparkSession, settings: Settings) -> list[str]:
    """Create the namespace, the events table and the rejects table (idempotent); the raw archive too
    when ``archive_raw`` is on.

    Returns:
        The qualified names of the tables.
    """
    create_namespace(spark, settings)
    names = [create_events_table(spark, settings), create_rejects_table(spark, settings)]
    if settings.archive_raw:
        names.append(create_archive_table(spark, settings))
    return names


def show_create_table(spark: SparkSession, name: str) -> str:
    """The table's DDL as Iceberg reports it."""
    return spark.sql(f"SHOW CREATE TABLE {checked_table_name(name)}").first()[0]


def table_properties(spark: SparkSession, name: str) -> pd.DataFrame:
    """The table's properties as a small pandas table."""
    return spark.sql(f"SHOW TBLPROPERTIES {checked_table_name(name)}").toPandas()
