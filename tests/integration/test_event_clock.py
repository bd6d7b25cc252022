"""One far-future ``event_ts`` cannot move "now": every engine's default window end ignores it, and the event is kept.

The reproduction of issue 58 (item 2): 19 normal events and one stamped ``9999-12-31T23:59:59.999999Z``,
ingested from the emulator; the last 15 minutes by type used to hold only the bogus event.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from icestream.config import load_settings
from icestream.kinesis.clients import ensure_stream
from icestream.lake.table import LakeTable, setup_tables
from icestream.queries import duckdb_engine as duck
from icestream.queries import pyiceberg_engine as ice
from icestream.queries import realtime
from tests.helpers.ingest import drain
from tests.helpers.streams import event_payload, put

BOGUS = "9999-12-31T23:59:59.999999Z"


@pytest.fixture(scope="module")
def ingested(spark, emulator: str):
    """The 20 events in a fresh table: ``(settings, table, the 19 normal events' newest time)``."""
    suffix = uuid.uuid4().hex[:8]
    settings = load_settings(stream_name=f"clock-{suffix}", table=f"clock_{suffix}")
    ensure_stream(settings, shard_count=1)
    setup_tables(spark, settings)
    normal = [event_payload(number, f"u{number % 4}") for number in range(19)]
    bogus = json.loads(event_payload(19, "u-bogus"))
    bogus["event_ts"] = BOGUS
    put(settings, [(data, "k") for data in [*normal, json.dumps(bogus).encode()]])
    drain(spark, settings)
    newest = max(datetime.fromisoformat(json.loads(data)["event_ts"]) for data in normal)
    return settings, LakeTable(spark, settings.table_name), newest.astimezone(UTC)


def test_the_bogus_event_is_kept_and_listed_as_ahead_of_its_arrival(spark, ingested) -> None:
    _, table, _ = ingested
    assert spark.table(table.name).count() == 20
    ahead = realtime.ahead_of_arrival(table)
    assert ahead["event_id"].tolist() == ["ev-19"]
    assert ahead["ahead_s"].iloc[0] > 7000 * 365 * 86400


def test_spark_now_is_the_newest_trusted_event(spark, ingested) -> None:
    _, table, newest = ingested
    assert realtime.resolve_now(table) == newest
    by_type = realtime.events_by_type(table, 15)
    assert by_type.set_index("event_type")["events"].to_dict() == {"click": 19}


def test_pyiceberg_now_is_the_newest_trusted_event(spark, ingested) -> None:
    settings, _, newest = ingested
    iceberg_table = ice.open_table(settings)
    assert ice.newest_event_ts(iceberg_table) == newest
    by_type = ice.events_by_type(iceberg_table, 15)
    assert by_type.set_index("event_type")["events"].to_dict() == {"click": 19}


def test_duckdb_now_is_the_newest_trusted_event(spark, ingested) -> None:
    _, table, newest = ingested
    location, _ = table.inspect.metadata_location()
    dashboard = duck.kpi_dashboard(duck.connect(), location, 15)
    assert dashboard.totals["newest_event"].iloc[0] == newest
    assert dashboard.by_type.set_index("event_type")["events"].to_dict() == {"click": 19}


def test_a_window_that_reaches_the_bogus_time_still_counts_it(spark, ingested) -> None:
    _, table, _ = ingested
    far = realtime.events_by_type(table, 15, now=datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC))
    assert far.set_index("event_type")["events"].to_dict() == {"click": 1}
