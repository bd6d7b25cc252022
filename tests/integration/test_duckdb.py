"""DuckDB reads the table Spark wrote and computes the same dashboard."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from icestream.lake.table import LakeTable
from icestream.queries import duckdb_engine as duck
from icestream.queries import realtime
from icestream.runtime.catalog import current_metadata_location
from icestream.synthetic.generator import backfill_config
from tests.conftest import generated_table


@pytest.fixture(scope="module")
def table(spark, settings):
    """A 2-hour table of about 5,000 events (duplicates and bad records included) in several snapshots."""
    end = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    with generated_table(spark, "q", backfill_config(hours=2, count=5000, end=end, seed=5), 2000) as made:
        local, name, _, _ = made
        yield local, LakeTable(spark, name)


@pytest.fixture(scope="module")
def connection():
    con = duck.connect()
    yield con
    con.close()


def test_metadata_location_from_spark_and_from_the_catalog_agree(table) -> None:
    local, events = table
    location, snapshot_id = events.inspect.metadata_location()
    assert location.endswith(".metadata.json")
    assert location.removeprefix("file:") == current_metadata_location(local).removeprefix("file:")
    assert snapshot_id == events.inspect.current_snapshot_id()


def test_duckdb_sees_the_same_snapshots(table, connection) -> None:
    _, events = table
    location, _ = events.inspect.metadata_location()
    seen = duck.snapshots(connection, location)
    assert sorted(seen["snapshot_id"].astype("int64")) == sorted(events.inspect.snapshots()["snapshot_id"])


@pytest.mark.parametrize("minutes", [None, 20])
def test_both_engines_give_the_same_dashboard(table, connection, minutes) -> None:
    _, events = table
    location, snapshot_id = events.inspect.metadata_location()
    from_spark = realtime.kpi_dashboard(events, minutes, snapshot_id=snapshot_id)
    from_duckdb = duck.kpi_dashboard(connection, location, minutes)
    assert from_spark.totals.iloc[0]["events"] > 0
    pd.testing.assert_frame_equal(from_spark.totals, from_duckdb.totals, check_dtype=False, rtol=1e-9)
    pd.testing.assert_frame_equal(from_spark.by_type, from_duckdb.by_type, check_dtype=False)
    pd.testing.assert_frame_equal(from_spark.by_device, from_duckdb.by_device, check_dtype=False)


def test_extensions_come_from_the_wheels() -> None:
    for name in (*duck.EXTENSIONS, *duck.S3_EXTENSIONS):
        path = duck.extension_path(name)
        assert path.is_file()
        assert path.name == f"{name}.duckdb_extension"
