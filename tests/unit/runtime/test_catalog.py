"""The catalog: who may write, and a table's metadata file found without Spark."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from icestream.config import load_settings
from icestream.errors import ConfigError
from icestream.runtime import catalog

# The columns of Iceberg's JdbcCatalog table (schema V1), as Spark creates them.
ICEBERG_TABLES_DDL = (
    "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL, "
    "table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
    "iceberg_type VARCHAR(5), PRIMARY KEY (catalog_name, table_namespace, table_name))"
)


@pytest.fixture
def jdbc_settings(tmp_path: Path):
    settings = load_settings(warehouse=str(tmp_path / "wh"))
    settings.catalog_file.parent.mkdir(parents=True)
    with sqlite3.connect(settings.catalog_file) as connection:
        connection.execute(ICEBERG_TABLES_DDL)
        rows = [
            ("lake", "streaming_analytics", "user_events", "file:/wh/ns/user_events/metadata/00003-a.metadata.json"),
            ("other", "streaming_analytics", "user_events", "file:/elsewhere/00009-b.metadata.json"),
            ("lake", "streaming_analytics", "user_events_rejects", "file:/wh/r/00001-c.metadata.json"),
        ]  # fmt: skip
        connection.executemany("INSERT INTO iceberg_tables VALUES (?, ?, ?, ?, NULL, 'TABLE')", rows)
    connection.close()
    return settings


def test_jdbc_metadata_location_is_the_tables_row(jdbc_settings) -> None:
    location = catalog.current_metadata_location(jdbc_settings)
    assert location == "file:/wh/ns/user_events/metadata/00003-a.metadata.json"
    assert catalog.current_metadata_location(jdbc_settings, "user_events_rejects").endswith("00001-c.metadata.json")


def test_jdbc_reader_never_creates_the_catalog(tmp_path: Path) -> None:
    settings = load_settings(warehouse=str(tmp_path / "wh"))
    with pytest.raises(ConfigError, match="create it first"):
        catalog.current_metadata_location(settings)
    assert not settings.catalog_file.exists()


@pytest.mark.parametrize("table", ["missing", None])
def test_jdbc_unknown_table_or_empty_catalog(jdbc_settings, table: str | None) -> None:
    if table is None:  # a catalog file Spark has not initialised yet
        jdbc_settings.catalog_file.unlink()
        sqlite3.connect(jdbc_settings.catalog_file).close()
    with pytest.raises(ConfigError, match=r"not in the catalog .*catalog\.db: create it first"):
        catalog.current_metadata_location(jdbc_settings, table)


def test_the_catalog_tables_are_created_once(tmp_path: Path) -> None:
    settings = load_settings(warehouse=str(tmp_path / "new"))
    assert catalog.ensure_jdbc_catalog(settings) == settings.catalog_file
    catalog.ensure_jdbc_catalog(settings)  # idempotent
    with closing(sqlite3.connect(settings.catalog_file)) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = [row[1] for row in connection.execute("PRAGMA table_info(iceberg_tables)")]
    assert names == {"iceberg_tables", "iceberg_namespace_properties"}
    assert "iceberg_type" in columns  # schema V1, as jdbc.schema-version=V1 expects
    with pytest.raises(ConfigError, match="create it first"):
        catalog.current_metadata_location(settings)


def test_hadoop_metadata_location_is_the_version_hint(tmp_path: Path) -> None:
    settings = load_settings(warehouse=str(tmp_path), catalog_type="hadoop")
    with pytest.raises(ConfigError, match=r"version-hint\.text not found"):
        catalog.current_metadata_location(settings)
    metadata = tmp_path / "streaming_analytics" / "user_events" / "metadata"
    metadata.mkdir(parents=True)
    (metadata / "version-hint.text").write_text("7\n")
    assert catalog.current_metadata_location(settings) == str(metadata / "v7.metadata.json")


@pytest.fixture
def glue_settings(monkeypatch: pytest.MonkeyPatch):
    """The aws profile against moto's in-process Glue (no network, no account)."""
    from moto import mock_aws

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield load_settings(profile="aws", warehouse="s3://bucket/warehouse")


def test_glue_metadata_location_is_the_glue_tables_parameter(glue_settings) -> None:
    from icestream.runtime import aws

    glue = aws.client(glue_settings, "glue")
    glue.create_database(DatabaseInput={"Name": "streaming_analytics"})
    location = "s3://bucket/warehouse/streaming_analytics.db/user_events/metadata/00001-a.metadata.json"
    table = {"Name": "user_events", "Parameters": {"table_type": "ICEBERG", "metadata_location": location}}
    glue.create_table(DatabaseName="streaming_analytics", TableInput=table)
    glue.create_table(DatabaseName="streaming_analytics", TableInput={"Name": "plain_hive", "Parameters": {}})
    assert catalog.current_metadata_location(glue_settings) == location
    with pytest.raises(ConfigError, match="not an Iceberg table"):
        catalog.current_metadata_location(glue_settings, "plain_hive")
    with pytest.raises(ConfigError, match="not in the Glue catalog"):
        catalog.current_metadata_location(glue_settings, "missing")


def test_names_are_validated_before_any_lookup(jdbc_settings) -> None:
    with pytest.raises(ConfigError, match="not a valid identifier"):
        catalog.current_metadata_location(jdbc_settings, "user_events' OR '1'='1")


@pytest.mark.parametrize(
    ("overrides", "safe", "words"),
    [
        ({}, True, "jdbc (SQLite"),
        ({"catalog_type": "hadoop"}, False, "ONE writing process only"),
        ({"profile": "aws", "warehouse": "s3://b/w"}, True, "glue (AWS Glue in us-east-1"),
    ],
)
def test_doctor_line_says_who_may_write(tmp_path: Path, overrides: dict[str, str], safe: bool, words: str) -> None:
    settings = load_settings(**({"warehouse": str(tmp_path)} | overrides))
    assert catalog.several_writers_safe(settings) is safe
    line = catalog.describe_catalog(settings)
    assert words in line
    assert ("safe for several writing processes" in line) is safe
