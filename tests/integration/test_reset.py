"""``icestream reset``: the plan changes nothing; --yes drops the tables, recreates the stream, clears run state."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

import pytest

from icestream.cli import main
from icestream.config import load_settings
from icestream.demos.layout_demo import create_layout_demo
from icestream.errors import ConfigError
from icestream.ingest.positions import mark_source_stream
from icestream.kinesis.clients import ensure_stream, kinesis_client, list_shards
from icestream.lake.table import setup_tables
from icestream.workbook.reset import apply_reset, plan_reset, workbook_tables
from tests.helpers.ingest import drain
from tests.helpers.streams import event_payload, put


@pytest.fixture
def workbook(spark, emulator: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A private workbook: its own stream (3 shards, one record), tables and run folder with run state."""
    suffix = uuid.uuid4().hex[:8]
    overrides = {"stream_name": f"reset-{suffix}", "table": f"reset_{suffix}", "kinesis_endpoint": emulator}
    settings = load_settings(run_dir=str(tmp_path / "run"), **overrides)
    ensure_stream(settings, shard_count=3)
    kinesis_client(settings).put_record(StreamName=settings.stream_name, Data=b"{}", PartitionKey="u1")
    setup_tables(spark, settings)
    create_layout_demo(spark, settings)
    run_dir = settings.path("run_dir")
    run_dir.mkdir(parents=True)
    state = ["produce_backfill_summary.json", "anomalies_truth.jsonl", "ingest_progress.jsonl"]
    state.append("02_ingest_summary.json")
    for name in state:
        (run_dir / name).write_text(json.dumps({"name": name}))
    (run_dir / "emulator.json").write_text("{}")  # the emulator's own state: never deleted
    for key, value in {"ICESTREAM_RUN_DIR": str(run_dir), "ICESTREAM_KINESIS_ENDPOINT": emulator}.items():
        monkeypatch.setenv(key, value)
    yield settings, [run_dir / name for name in state]
    for name in (*workbook_tables(settings), *(settings.companion_table_name(kind) for kind in ROUTED_KINDS)):
        spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")


ROUTED_KINDS = ("purchase", "click")  # event types routed to <table>_<type> in the routed tests


def test_a_plan_lists_what_would_go_and_changes_nothing(workbook, spark) -> None:
    settings, state = workbook
    table = settings.table
    plan = plan_reset(spark, settings)
    assert set(plan.tables) == {settings.table_name, settings.rejects_table_name,
                                f"{settings.namespace_name}.{table}_layout_demo"}  # fmt: skip
    assert plan.stream_exists
    assert plan.shard_count == 3
    assert set(plan.files) == set(state)
    assert all(spark.catalog.tableExists(name) for name in plan.tables), "a plan changes nothing"
    assert all(path.is_file() for path in state)


def test_cli_needs_yes_and_then_starts_the_workbook_over(workbook, spark, capsys, monkeypatch) -> None:
    settings, state = workbook
    monkeypatch.setenv("ICESTREAM_STREAM_NAME", settings.stream_name)
    monkeypatch.setenv("ICESTREAM_TABLE", settings.table)
    client = kinesis_client(settings)
    created_before = client.describe_stream_summary(StreamName=settings.stream_name)["StreamDescriptionSummary"][
        "StreamCreationTimestamp"
    ]

    assert main(["reset"]) == 2
    shown = capsys.readouterr().out
    assert f"drop table {settings.table_name}" in shown
    assert f"delete and recreate stream {settings.stream_name} (3 shards)" in shown
    assert spark.catalog.tableExists(settings.table_name), "without --yes nothing is dropped"

    assert main(["reset", "--yes"]) == 0
    assert not any(spark.catalog.tableExists(name) for name in workbook_tables(settings))
    assert not any(path.exists() for path in state)
    assert (settings.path("run_dir") / "emulator.json").is_file()
    summary = client.describe_stream_summary(StreamName=settings.stream_name)["StreamDescriptionSummary"]
    assert summary["StreamStatus"] == "ACTIVE"
    assert summary["OpenShardCount"] == 3
    assert summary["StreamCreationTimestamp"] >= created_before
    for shard in list_shards(client, settings.stream_name):
        iterator = client.get_shard_iterator(
            StreamName=settings.stream_name, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        assert client.get_records(ShardIterator=iterator)["Records"] == [], "the recreated stream is empty"

    # Reset again on the empty workbook: nothing left to drop, the stream recreated again.
    again = apply_reset(spark, settings, plan_reset(spark, settings))
    assert again.tables == ()
    assert again.files == ()


def test_a_reset_names_a_stream_that_did_not_feed_the_tables_and_refuses(workbook, spark, capsys, monkeypatch) -> None:
    """As the ingest refuses to write a table another stream feeds, reset refuses to drop it: with a mistyped or
    another stream name it had planned to drop that stream's tables and recreate a stream nobody asked for."""
    settings, state = workbook
    mark_source_stream(spark, settings.table_name, settings.stream_name)  # as the ingest's first commit does
    other = f"{settings.stream_name}-other"
    with pytest.raises(ConfigError, match=f"is fed by stream '{settings.stream_name}', not '{other}'"):
        plan_reset(spark, dataclasses.replace(settings, stream_name=other))

    monkeypatch.setenv("ICESTREAM_STREAM_NAME", other)
    monkeypatch.setenv("ICESTREAM_TABLE", settings.table)
    assert main(["reset", "--yes"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"error: reset refused: {settings.table_name} is fed by stream"), errors
    assert spark.catalog.tableExists(settings.table_name), "nothing dropped"
    assert all(path.is_file() for path in state), "no run state deleted"
    assert other not in kinesis_client(settings).list_streams()["StreamNames"], "no stream created"


def test_a_reset_lists_and_drops_the_routed_tables_so_they_start_over(workbook, spark, capsys, monkeypatch) -> None:
    """Routed tables went on holding their rows through a reset: the next ingest appended to them (issue 58)."""
    settings, _state = workbook
    routing = {"route": "event_type"}

    def send(first: int) -> set[str]:
        events = [json.loads(event_payload(number, f"u{number % 3}")) for number in range(first, first + 8)]
        for number, event in enumerate(events):
            event["event_type"] = ROUTED_KINDS[number % 2]
        put(settings, [(json.dumps(event).encode(), event["user_id"]) for event in events])
        return {event["event_id"] for event in events if event["event_type"] == "purchase"}

    before = send(0)
    drain(spark, settings, routing=routing)
    routed = [settings.companion_table_name(kind) for kind in ROUTED_KINDS]
    assert all(spark.catalog.tableExists(name) for name in routed), "the route made its tables"

    plan = plan_reset(spark, settings)
    assert set(routed) <= set(plan.tables)
    monkeypatch.setenv("ICESTREAM_STREAM_NAME", settings.stream_name)
    monkeypatch.setenv("ICESTREAM_TABLE", settings.table)
    assert main(["reset"]) == 2
    shown = capsys.readouterr().out
    assert all(f"drop table {name} (routed)" in shown for name in routed), shown
    apply_reset(spark, settings, plan)
    assert not any(spark.catalog.tableExists(name) for name in routed)

    setup_tables(spark, settings)
    after = send(100)
    drain(spark, settings, routing=routing)
    purchases = {row.event_id for row in spark.table(routed[0]).select("event_id").collect()}
    assert before, "there were purchases before the reset"
    assert after, "and after it"
    assert purchases == after, "the routed table holds only what came after the reset"
