"""icestream.queries.realtime against a bulk-loaded table, checked by pandas over the same generated events."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from icestream.config import load_settings
from icestream.demos.run_scope import this_run
from icestream.errors import ConfigError
from icestream.file_load.bulk import load_payloads
from icestream.lake.table import LakeTable, setup_tables
from icestream.queries import realtime
from icestream.synthetic.generator import backfill_config, generate
from icestream.timestamps import to_micros

END = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def loaded(spark, settings):
    """A 3-hour table of about 8,000 clean events in several files, and the same events in pandas."""
    local = load_settings(table=f"q_{uuid.uuid4().hex[:10]}")
    name = setup_tables(spark, local)[0].name
    records, _ = generate(backfill_config(hours=3, count=8000, end=END, seed=11, bad_rate=0.0, duplicate_rate=0.0))
    before = datetime.now(UTC)
    counts = load_payloads(spark, name, ((r.data, r.partition_key) for r in records), chunk_rows=3000)
    after = datetime.now(UTC)
    events = pd.DataFrame([json.loads(r.data) for r in records if r.kind == "event"])
    events["event_ts"] = pd.to_datetime(events["event_ts"], utc=True, format="ISO8601")
    events["device_type"] = events["device_info"].map(lambda device: device["device_type"])
    events["duration_ms"] = events["properties"].map(lambda props: float(props.get("duration_ms", "nan")))
    yield LakeTable(spark, name), events, counts, (before, after)
    spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")


def in_window(events: pd.DataFrame, minutes: float) -> pd.DataFrame:
    end = events["event_ts"].max()
    return events[(events["event_ts"] > end - pd.Timedelta(minutes=minutes)) & (events["event_ts"] <= end)]


def test_every_event_loaded(loaded) -> None:
    _, events, counts, _ = loaded
    assert counts == {"written": len(events), "skipped": 0, "deduplicated": 0}


def test_now_defaults_to_the_newest_event(spark, loaded) -> None:
    table, events, _, _ = loaded
    assert realtime.resolve_now(table) == events["event_ts"].max().to_pydatetime()
    given = datetime(2026, 1, 1, tzinfo=UTC)
    assert realtime.resolve_now(table, given) == given


def test_events_by_type_matches_pandas(spark, loaded) -> None:
    table, events, _, _ = loaded
    result = realtime.events_by_type(table, 15).set_index("event_type")
    expected = (
        in_window(events, 15)
        .groupby("event_type")
        .agg(events=("event_id", "size"), unique_users=("user_id", "nunique"), avg_duration_ms=("duration_ms", "mean"))
    )
    assert result["events"].to_dict() == expected["events"].to_dict()
    assert result["unique_users"].to_dict() == expected["unique_users"].to_dict()
    assert result.loc["page_view", "avg_duration_ms"] == pytest.approx(expected.loc["page_view", "avg_duration_ms"])
    assert result.drop(index="page_view")["avg_duration_ms"].isna().all()


def test_active_sessions_match_pandas(spark, loaded) -> None:
    table, events, _, _ = loaded
    result = realtime.active_sessions(table, 5, lookback_minutes=60).set_index("session_id")
    recent = in_window(events, 60)
    active = set(in_window(events, 5)["session_id"])
    expected = recent[recent["session_id"].isin(active)].groupby("session_id")["event_ts"].agg(["min", "max", "size"])
    assert set(result.index) == active
    lengths = (expected["max"] - expected["min"]).dt.total_seconds()
    assert result["length_s"].sort_index().to_numpy() == pytest.approx(lengths.sort_index().to_numpy())
    assert result["events"].sort_index().tolist() == expected["size"].sort_index().tolist()


@pytest.mark.parametrize("minutes", [None, 30])
def test_dashboard_matches_pandas(spark, loaded, minutes) -> None:
    table, events, _, (before, after) = loaded
    expected = events if minutes is None else in_window(events, minutes)
    dashboard = realtime.kpi_dashboard(table, minutes)
    totals = dashboard.totals.iloc[0]
    assert totals["events"] == len(expected)
    assert totals["unique_users"] == expected["user_id"].nunique()
    assert totals["unique_sessions"] == expected["session_id"].nunique()
    assert totals["oldest_event"] == expected["event_ts"].min()
    assert totals["newest_event"] == expected["event_ts"].max()
    # The bulk loader stamps one ingest time between `before` and `after`; arrival = event time.
    mean_event = expected["event_ts"].mean()
    assert (before - mean_event).total_seconds() - 1 <= totals["avg_wait_in_stream_s"]
    assert totals["avg_wait_in_stream_s"] <= (after - mean_event).total_seconds() + 1
    assert (
        dashboard.by_type.set_index("event_type")["events"].to_dict() == expected.groupby("event_type").size().to_dict()
    )
    assert dashboard.by_device.set_index("device_type")["events"].to_dict() == (
        expected.groupby("device_type").size().to_dict()
    )
    assert dashboard.by_type["events"].sum() == dashboard.by_device["events"].sum() == len(expected)
    assert dashboard.by_device["share"].sum() == pytest.approx(1.0)


def test_events_per_minute_match_pandas(spark, loaded) -> None:
    table, events, _, _ = loaded
    result = realtime.events_per_minute(table, 20)
    assert "date_trunc('minute', event_ts) AS minute" in table.last_statement.sql
    result["minute"] = pd.to_datetime(result["minute"]).dt.tz_localize("UTC")
    expected = in_window(events, 20).groupby([events["event_ts"].dt.floor("min"), "event_type"]).size()
    assert (
        result.set_index(["minute", "event_type"])["events"].sort_index().to_dict() == expected.sort_index().to_dict()
    )
    assert all(value is None or value > 0 for value in result["avg_duration_ms"])  # null is None, never NaN


def test_questions_count_only_the_runs_asked_for(spark, loaded, settings, tmp_path) -> None:
    table, events, _, _ = loaded
    run_id = events["properties"].map(lambda props: props["run_id"]).iloc[0]
    everything = realtime.kpi_dashboard(table).totals.iloc[0]["events"]
    assert realtime.kpi_dashboard(table, run_ids=[run_id]).totals.iloc[0]["events"] == everything
    assert table.last_statement.args == {"run_0": run_id}
    newest = events["event_ts"].max().to_pydatetime()
    assert realtime.events_by_type(table, 15, newest, run_ids=["run-other"]).empty
    # No backfill summary in the run folder: every run is this run's.
    scope = this_run(table, dataclasses.replace(settings, run_dir=str(tmp_path)))
    assert scope.run_ids is None
    assert scope.runs["this_run"].all()
    assert scope.runs.set_index("run_id").loc[run_id, "events"] == len(events)


def test_narrow_window_prunes_files(spark, loaded) -> None:
    table, events, _, _ = loaded
    report = realtime.pruning_report(table, 15).iloc[0]
    assert report["rows_in_window"] == len(in_window(events, 15))
    assert report["data_files_in_table"] >= 4  # three hours in 3,000-row appends
    assert 1 <= report["data_files_scanned"] < report["data_files_in_table"]
    assert report["data_files_skipped"] > 0
    assert report["rows_read"] < len(events)


def test_whole_table_scan_reads_every_file(spark, loaded) -> None:
    table, events, _, _ = loaded
    metrics = realtime.scan_metrics(spark.table(table.name).groupBy("event_type").count())
    files = len(table.inspect.data_files())
    assert metrics["resultDataFiles"] == files
    assert metrics["numOutputRows"] == len(events)


def test_window_before_the_data_is_empty(spark, loaded) -> None:
    table, events, _, _ = loaded
    long_ago = events["event_ts"].min().to_pydatetime() - timedelta(hours=1)
    assert realtime.events_by_type(table, 15, now=long_ago).empty


def test_each_answer_records_the_statement_it_ran(loaded) -> None:
    table, events, _, _ = loaded
    realtime.events_by_type(table, 15)
    statement = table.last_statement
    assert statement.sql.startswith("SELECT event_type,")
    assert f"FROM {table.name}" in statement.sql
    assert "event_ts > timestamp_micros(:start)" in statement.sql  # the window is bound, not text
    newest = events["event_ts"].max().to_pydatetime()
    assert statement.args["end"] - statement.args["start"] == 15 * 60_000_000
    assert statement.args["end"] == to_micros(newest)
    realtime.kpi_dashboard(table, 30)
    totals, counts = list(table.statements)[-2:]
    assert "count(DISTINCT session_id) AS unique_sessions" in totals.sql
    assert "GROUP BY ALL" in counts.sql
    assert totals.args == counts.args == statement.args | {"start": statement.args["end"] - 30 * 60_000_000}


def test_window_minutes_are_checked(loaded) -> None:
    table, _, _, _ = loaded
    with pytest.raises(ConfigError):
        realtime.window(table, 0)
