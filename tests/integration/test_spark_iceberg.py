"""Spark + Iceberg through the session factory: tables, appends, time travel, metadata tables."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from contextlib import closing
from datetime import UTC, datetime

import pytest

from icestream.config import Settings, load_settings
from icestream.kinesis.clients import ensure_stream
from icestream.lake.schema import table_columns
from icestream.lake.table import LakeTable, setup_tables
from icestream.runtime.catalog import several_writers_safe
from icestream.runtime.spark import get_spark


def sample_rows(count: int, offset: int = 0) -> list[tuple]:
    ts = datetime(2026, 11, 21, 5, 0, tzinfo=UTC)
    return [
        (
            f"e-{offset + i}",
            f"u-{i % 3}",
            f"s-{i % 2}",
            "click",
            ts,
            {"page": "/home"},
            ("mobile", "iOS", "5.2.1"),
            "shardId-000000000000",
            str(1000 + offset + i),
            f"u-{i % 3}",
            ts,
            ts,
        )
        for i in range(count)
    ]


def test_session_is_shared_and_configured(spark, settings: Settings) -> None:
    assert get_spark(settings) is spark
    assert spark.conf.get("spark.sql.catalog.lake") == "org.apache.iceberg.spark.SparkCatalog"
    assert spark.conf.get("spark.sql.catalog.lake.type") == settings.catalog_type
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.ui.enabled") == "false"


def test_the_catalog_lives_in_the_test_warehouse(spark, settings: Settings, test_home) -> None:
    """The JDBC catalog's SQLite file follows the warehouse setting: tests never touch data/."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.namespace_name}")
    if settings.catalog_type != "jdbc":
        pytest.skip("the Hadoop catalog has no catalog file")
    assert spark.conf.get("spark.sql.catalog.lake.uri") == f"jdbc:sqlite:{test_home / 'warehouse' / 'catalog.db'}"
    assert settings.catalog_file == test_home / "warehouse" / "catalog.db"
    with closing(sqlite3.connect(f"{settings.catalog_file.as_uri()}?mode=ro", uri=True)) as catalog:
        namespaces = {row[0] for row in catalog.execute("SELECT namespace FROM iceberg_namespace_properties")}
    assert settings.namespace in namespaces
    # The SQLite driver found its native library (Debian's jar has none inside).
    assert "-Djava.library.path=" in spark.conf.get("spark.driver.extraJavaOptions")


@pytest.fixture
def own_table(stream_settings: Settings) -> Settings:
    """A fresh stream and its own tables: these tests write rows the workbook's default table must not hold."""
    return load_settings(stream_name=stream_settings.stream_name, table=f"si_{uuid.uuid4().hex[:10]}")


def test_bind_parameters_reach_spark_through_icebergs_sql_extensions(spark) -> None:
    # Iceberg 1.11's extensions dropped Spark 4.1's parameters (apache/iceberg#16625): UNBOUND_SQL_PARAMETER.
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    row = spark.sql("SELECT :number AS number, :moment AS moment", {"number": 7, "moment": moment}).first()
    assert (row.number, row.moment) == (7, moment.replace(tzinfo=None))  # the session's time zone is UTC


def test_a_failed_query_prints_no_stack_trace_before_its_error(spark, capfd: pytest.CaptureFixture[str]) -> None:
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN"):
        spark.sql("SELECT no_such_column_anywhere")
    logged = capfd.readouterr().err
    assert "no_such_column_anywhere" not in logged, logged[:500]  # pyspark 4 logged it as JSON with the JVM trace


def test_stream_table_append_time_travel_and_metadata(spark, own_table: Settings) -> None:
    stream_settings = own_table
    ensure_stream(stream_settings, shard_count=1)
    events, rejects = (table.name for table in setup_tables(spark, stream_settings))
    assert [table.name for table in setup_tables(spark, stream_settings)] == [events, rejects]  # idempotent
    assert "hours(event_ts)" in LakeTable(spark, events).show_create()
    table = spark.table(events)
    assert tuple(table.columns) == table_columns()

    schema = table.schema
    before = spark.table(events).count()
    spark.createDataFrame(sample_rows(5), schema).writeTo(events).option(
        "snapshot-property.icestream.test", "one"
    ).append()
    first = spark.sql(f"SELECT snapshot_id FROM {events}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    spark.createDataFrame(sample_rows(3, offset=5), schema).writeTo(events).append()

    assert spark.table(events).count() == before + 8
    assert spark.sql(f"SELECT count(*) FROM {events} VERSION AS OF {first}").first()[0] == before + 5
    summary = spark.sql(f"SELECT summary FROM {events}.snapshots WHERE snapshot_id = {first}").first()[0]
    assert summary["icestream.test"] == "one"
    files = spark.sql(f"SELECT file_path, record_count FROM {events}.files").collect()
    assert sum(row.record_count for row in files) == before + 8
    partitions = spark.sql(f"SELECT partition.event_ts_hour FROM {events}.partitions").collect()
    assert len(partitions) >= 1


def test_commits_from_two_processes_are_never_lost(spark, own_table: Settings) -> None:
    stream_settings = own_table
    """Two processes append to one table at the same time: with the JDBC (or Glue) catalog none is lost."""
    if not several_writers_safe(stream_settings):
        pytest.skip("the Hadoop catalog is safe for one writing process only")
    events = setup_tables(spark, stream_settings)[0].name
    schema = spark.table(events).schema
    spark.createDataFrame(sample_rows(1), schema).writeTo(events).append()
    before = spark.table(events).count()
    rounds = 5
    script = (
        "from icestream.config import load_settings\n"
        "from icestream.runtime.spark import get_spark\n"
        f"own = load_settings(stream_name={stream_settings.stream_name!r}, table={stream_settings.table!r})\n"
        "spark = get_spark(own, app_name='second-writer')\n"
        f"spark.table('{events}').count()\n"
        "print('ready', flush=True)\n"
        f"for _ in range({rounds}):\n"
        f"    spark.sql(\"INSERT INTO {events} SELECT * FROM {events} WHERE event_id = 'e-0' LIMIT 1\")\n"
    )
    other = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert other.stdout is not None
    assert other.stdout.readline().strip() == "ready"
    for offset in range(rounds):  # while the other process commits too
        spark.createDataFrame(sample_rows(1, offset=100 + offset), schema).writeTo(events).append()
    assert other.wait(timeout=300) == 0
    spark.sql(f"REFRESH TABLE {events}")  # Spark's catalog caches a table for 30 s; the other's commits are newer
    assert spark.table(events).count() == before + 2 * rounds


READY_SESSION = """
from pyspark.sql import SparkSession
from icestream.config import load_settings
from icestream.runtime.jars import resolve_jars
from icestream.runtime.spark import get_spark

settings = load_settings()
ready = (  # what a notebook platform hands over: its own master and settings, no 'lake' catalog
    SparkSession.builder.master("local[1]").appName("platform")
    .config("spark.jars", resolve_jars(settings).spark_conf()["spark.jars"])
    .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
    .config("spark.sql.shuffle.partitions", "7").config("spark.ui.enabled", "false").getOrCreate()
)
spark = get_spark(settings)
assert spark is ready
spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.adopted")
partitions = spark.conf.get("spark.sql.shuffle.partitions")
print(spark.sparkContext.master, partitions, spark.catalog.databaseExists("lake.adopted"))
"""


def test_a_ready_session_keeps_its_settings_and_gains_the_catalog(settings: Settings, tmp_path) -> None:
    # Its own process (this one already holds the test session's SparkContext), in a scratch folder:
    # the platform's session has Spark's default spark-warehouse/ in its working directory.
    result = subprocess.run(
        [sys.executable, "-c", READY_SESSION], env=dict(os.environ), capture_output=True, text=True, timeout=300,
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["local[1]", "7", "True"]
