"""Create and describe the Iceberg tables (idempotent).

The events table is partitioned by ``hours(event_ts)``, a hidden partition: queries filter on
``event_ts`` itself and Iceberg prunes files, with no string date column to keep in sync.
Hours rather than days because the workbook's questions are about the last minutes and hours:
an hourly partition lets a "last 15 minutes" query open one or two partitions, and compaction works
on hour-sized units while the stream keeps writing the current hour. A stream of a few events per
second would be better served by ``days(event_ts)``; this is a one-line change here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.lake.schema import ARCHIVE_COLUMNS_DDL, EVENT_COLUMNS_DDL, METADATA_COLUMNS_DDL, REJECT_COLUMNS_DDL
from icestream.lake.statement import Statement
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

EVENTS_PARTITIONING = "hours(event_ts)"  # the events table's, and every routed table's

# How set-up runs a statement: ``run(table name, statement)``. The default runs it in the session;
# :func:`icestream.lake.table.setup_tables` runs it through the table's LakeTable, which records it.
Runner = Callable[[str, Statement], Any]

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
    # A column chunk stops its dictionary once it passes this size: soon for a column of unique values
    # (event_id, sequence_number), which Parquet otherwise encodes twice, by dictionary and then plainly,
    # for its first page (20,000 rows) in every file; a column of few values (event_type, the device
    # fields, the property names) keeps its dictionary. Iceberg's default is 2 MiB. Measured 2026-11-27
    # (bench/bench_write_properties.py): see docs/performance.md.
    "write.parquet.dict-size-bytes": str(64 * 1024),
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


def _session_runner(spark: SparkSession) -> Runner:
    def run(_table: str, statement: Statement) -> Any:
        return statement.run(spark)

    return run


def _ensure_properties(run: Runner, name: str) -> None:
    """Apply TABLE_PROPERTIES to a table that already existed (idempotent; format-version stays)."""
    current = {row.key: row.value for row in run(name, Statement(f"SHOW TBLPROPERTIES {name}")).collect()}
    wanted = {key: value for key, value in TABLE_PROPERTIES.items() if key != "format-version"}
    if any(current.get(key) != value for key, value in wanted.items()):
        run(name, Statement(f"ALTER TABLE {name} SET TBLPROPERTIES ({_properties_sql(wanted)})", writes=True))


def _properties_sql(properties: Mapping[str, str]) -> str:
    # Keys and values are our own constants and checked names, never user input.
    return ",\n  ".join(f"'{key}' = '{value}'" for key, value in properties.items())


def create_table_statement(
    name: str,
    columns: tuple[str, ...],
    partitioning: str | None,
    comment: str,
    properties: Mapping[str, str] | None = None,
) -> Statement:
    """The ``CREATE TABLE IF NOT EXISTS`` of one table, with the project's properties (None: unpartitioned).

    ``properties`` are set with the project's, in the creating commit itself (the caller's own keys and
    checked names only: they stand in the statement's text).
    """
    body = ",\n  ".join(columns)
    return Statement(
        f"CREATE TABLE IF NOT EXISTS {checked_table_name(name)} (\n  {body}\n) USING iceberg\n"
        + (f"PARTITIONED BY ({partitioning})\n" if partitioning else "")
        + f"COMMENT '{comment}'\n"
        f"TBLPROPERTIES (\n  {_properties_sql({**TABLE_PROPERTIES, **(properties or {})})}\n)",
        writes=True,
    )


def _create_table(run: Runner, name: str, statement: Statement) -> str:
    """Run a table's ``CREATE TABLE IF NOT EXISTS``, then give an older table the project's properties."""
    name = checked_table_name(name)
    run(name, statement)
    _ensure_properties(run, name)
    return name


def create_namespace(spark: SparkSession, settings: Settings, run: Runner | None = None) -> str:
    """Create the namespace unless it exists; return its qualified name."""
    name = qualified_name(settings.catalog, settings.namespace)
    (run or _session_runner(spark))(
        checked_table_name(settings.table_name), Statement(f"CREATE NAMESPACE IF NOT EXISTS {name}", writes=True)
    )
    return name


def events_table_statement(settings: Settings, properties: Mapping[str, str] | None = None) -> Statement:
    """The events table's ``CREATE TABLE IF NOT EXISTS`` (``properties`` as in :func:`create_table_statement`)."""
    return create_table_statement(
        settings.table_name,
        EVENT_COLUMNS_DDL + METADATA_COLUMNS_DDL,
        EVENTS_PARTITIONING,
        f"User events streamed from Kinesis stream {settings.stream_name}",
        properties,
    )


def routed_table_comment(stream_name: str) -> str:
    """The comment of a table the ingest made for the routed events of ``stream_name``."""
    return f"Events of Kinesis stream {stream_name} routed here by the ingest"


def create_routed_table(
    spark: SparkSession,
    settings: Settings,
    name: str,
    run: Runner | None = None,
    properties: Mapping[str, str] | None = None,
) -> str:
    """Create a table the ingest routes events to, unless it exists; return its qualified name.

    It is made like the events table: its declared columns, ``hours(event_ts)`` and the project's
    properties, plus ``properties`` (which route made it: see :mod:`icestream.ingest.routing`). Two
    ingests that see the same new table at once both run ``CREATE TABLE IF NOT EXISTS``; the catalog
    creates it once and answers the other that it already exists (Iceberg's ``AlreadyExistsException``,
    raised to Spark as ``TableAlreadyExistsException``), which then uses it. A table that existed
    before is left as it is: the caller reads its properties to learn whose it is.

    Raises:
        ConfigError: If ``name`` is not a qualified table name.
    """
    name = checked_table_name(name)
    statement = create_table_statement(
        name,
        EVENT_COLUMNS_DDL + METADATA_COLUMNS_DDL,
        EVENTS_PARTITIONING,
        routed_table_comment(settings.stream_name),
        properties,
    )
    try:
        (run or _session_runner(spark))(name, statement)
    except Exception as error:
        # The race lost: the winner's table is the one to use (anything else is raised).
        if "already exists" not in str(error).lower() or not spark.catalog.tableExists(name):
            raise
    return name


def rejects_table_statement(settings: Settings, properties: Mapping[str, str] | None = None) -> Statement:
    """The rejects table's ``CREATE TABLE IF NOT EXISTS`` (``properties`` as in :func:`create_table_statement`).

    Rejects are few and read by ingest time (what went wrong recently), so they are partitioned by
    ``days(ingest_ts)``.
    """
    return create_table_statement(
        settings.rejects_table_name,
        REJECT_COLUMNS_DDL,
        "days(ingest_ts)",
        f"Records from {settings.stream_name} the ingest could not accept, with the reason",
        properties,
    )


def create_events_table(
    spark: SparkSession, settings: Settings, run: Runner | None = None, properties: Mapping[str, str] | None = None
) -> str:
    """Create the events table unless it exists, with ``properties`` beside the project's; return its qualified name."""
    statement = events_table_statement(settings, properties)
    return _create_table(run or _session_runner(spark), settings.table_name, statement)


def create_rejects_table(
    spark: SparkSession, settings: Settings, run: Runner | None = None, properties: Mapping[str, str] | None = None
) -> str:
    """Create the table of rejected records unless it exists, with ``properties``; return its qualified name."""
    statement = rejects_table_statement(settings, properties)
    return _create_table(run or _session_runner(spark), settings.rejects_table_name, statement)


def create_archive_table(
    spark: SparkSession, settings: Settings, run: Runner | None = None, properties: Mapping[str, str] | None = None
) -> str:
    """Create the raw archive unless it exists, with ``properties``; return its qualified name.

    It is read by arrival day (replay a day, drop days past retention), so it is partitioned by
    ``days(arrival_ts)``: expiring a day is a metadata-only delete of whole files.
    """
    statement = create_table_statement(
        settings.archive_table_name,
        ARCHIVE_COLUMNS_DDL,
        "days(arrival_ts)",
        f"Every record of {settings.stream_name} as received (the raw archive)",
        properties,
    )
    return _create_table(run or _session_runner(spark), settings.archive_table_name, statement)


def table_properties(spark: SparkSession, name: str) -> pd.DataFrame:
    """The table's properties as a small pandas table, values as a reader expects them.

    A creation time kept as epoch seconds (``icestream.source-stream-created``) is shown as a UTC
    time, and Iceberg's ``current-snapshot-id`` of ``none`` says that nothing was committed yet.
    """
    frame = spark.sql(f"SHOW TBLPROPERTIES {checked_table_name(name)}").toPandas()
    frame["value"] = [readable_property(key, value) for key, value in zip(frame["key"], frame["value"], strict=True)]
    return frame


def readable_property(key: str, value: str) -> str:
    """A property's value as a reader expects it (see :func:`table_properties`)."""
    if key.endswith("-created") and re.fullmatch(r"\d+(\.\d+)?", value):
        moment = datetime.fromtimestamp(float(value), UTC)
        return f"{moment:%Y-%m-%d %H:%M:%S} UTC"
    if key == "current-snapshot-id" and value == "none":
        return "none (nothing committed yet)"
    return value
