"""Three engines, one table: Spark, DuckDB and pyiceberg give the same numbers, now and at an older snapshot."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from icestream.errors import ConfigError
from icestream.lake.table import LakeTable
from icestream.lake.window import event_time_range
from icestream.queries import duckdb_engine as duck
from icestream.queries import pyiceberg_engine as ice
from icestream.queries import realtime
from icestream.synthetic.generator import backfill_config
from tests.conftest import generated_table

END = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def table(spark, settings):
    """A 2-hour table of about 5,000 events in three snapshots, under the session's catalog."""
    with generated_table(spark, "pi", backfill_config(hours=2, count=5000, end=END, seed=11), 2000) as made:
        local, name, _, _ = made
        yield local, LakeTable(spark, name)


def by_type(frame: pd.DataFrame) -> pd.DataFrame:
    """``event_type``, ``events`` in one order, whatever order an engine returned them in."""
    return frame[["event_type", "events"]].astype({"events": "int64"}).sort_values("event_type", ignore_index=True)


@pytest.mark.parametrize("minutes", [None, 20, 0.5])
def test_three_engines_give_the_same_events_by_type(spark, table, minutes: float | None) -> None:
    local, events = table
    location, snapshot_id = events.inspect.metadata_location()
    now = event_time_range(events)[1]
    from_spark = realtime.kpi_dashboard(events, minutes, now=now, snapshot_id=snapshot_id).by_type
    connection = duck.connect()
    try:
        from_duckdb = duck.kpi_dashboard(connection, location, minutes, now=now).by_type
    finally:
        connection.close()
    iceberg_table = ice.open_table(local)
    from_pyiceberg = ice.events_by_type(iceberg_table, minutes, now=now)
    assert iceberg_table.metadata.current_snapshot_id == snapshot_id  # the three read the same snapshot
    assert from_spark["events"].sum() > 0
    pd.testing.assert_frame_equal(by_type(from_spark), by_type(from_pyiceberg))
    pd.testing.assert_frame_equal(by_type(from_duckdb), by_type(from_pyiceberg))
    # The same order too: most events first, ties by type.
    assert list(from_pyiceberg["event_type"]) == list(from_spark["event_type"])


def test_the_window_ends_at_the_newest_event_by_default(spark, table) -> None:
    local, events = table
    iceberg_table = ice.open_table(local)
    assert ice.newest_event_ts(iceberg_table) == event_time_range(events)[1]
    pd.testing.assert_frame_equal(
        ice.events_by_type(iceberg_table, 20),
        ice.events_by_type(iceberg_table, 20, now=event_time_range(events)[1]),
    )


def test_pyiceberg_reads_an_older_snapshot_as_spark_does(spark, table) -> None:
    local, events = table
    iceberg_table = ice.open_table(local)
    from_spark = events.inspect.snapshots()
    seen = ice.snapshots(iceberg_table)
    assert list(seen["snapshot_id"]) == list(from_spark["snapshot_id"])
    assert len(seen) >= 3
    first = int(seen["snapshot_id"].iloc[0])
    older = ice.events_by_type(iceberg_table, snapshot_id=first)
    pd.testing.assert_frame_equal(by_type(older), by_type(events.versions.counts_by_type(first)))
    assert older["events"].sum() == events.versions.total_records(first)
    assert older["events"].sum() < ice.events_by_type(iceberg_table)["events"].sum()


def test_unknown_snapshot_and_table_are_clear_errors(table) -> None:
    local, _ = table
    with pytest.raises(ConfigError, match="no snapshot 42"):
        ice.read(ice.open_table(local), snapshot_id=42)
    with pytest.raises(ConfigError, match=r"create it first|not found"):
        ice.open_table(local, "no_such_table")
