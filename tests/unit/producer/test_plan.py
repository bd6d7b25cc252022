"""What a produce run sends: exactly ``--count`` records in every mode, the rate it uses and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icestream import cli
from icestream.config import Settings, load_settings
from icestream.errors import ConfigError
from icestream.producer.plan import DEFAULT_LIVE_RATE, live_rate, plan_production
from icestream.producer.run import read_run_summary, run_summary_path
from tests.helpers.fake_kinesis import AcceptingKinesis
from tests.unit.synthetic.ingest_rules import reject_reason

MIX = {"bad_rate": 0.005, "duplicate_rate": 0.01, "late_rate": 0.02}


class FourShards(AcceptingKinesis):
    """Accepts every record; describes a stream of four open shards."""

    def describe_stream_summary(self, StreamName: str) -> dict[str, Any]:  # noqa: N803 - boto3 names
        return {"StreamDescriptionSummary": {"OpenShardCount": 4, "StreamStatus": "ACTIVE"}}


@pytest.fixture
def kinesis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FourShards:
    """A fake Kinesis behind every client the CLI opens, and a run folder in ``tmp_path``."""
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path))
    client = FourShards()
    monkeypatch.setattr("icestream.kinesis.clients.kinesis_client", lambda settings, **_: client)
    return client


@pytest.fixture
def settings(kinesis: FourShards) -> Settings:
    return load_settings()


def payload_file(path: Path, lines: int) -> Path:
    path.write_text("".join(json.dumps({"user_id": f"u-{n}", "n": n}) + "\n" for n in range(lines)))
    return path


@pytest.mark.parametrize(
    "mode",
    [
        ["--rate", "20000"],  # live: the event times are now, so a fast rate keeps the test short
        ["--backfill-hours", "1"],
        ["--from-file", "FILE"],
    ],
    ids=["live", "backfill", "file"],
)
def test_count_sends_exactly_that_many_records_in_every_mode(
    kinesis: FourShards, settings: Settings, tmp_path: Path, mode: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    mode = [str(payload_file(tmp_path / "payloads.jsonl", 4_000)) if item == "FILE" else item for item in mode]
    summary_file = tmp_path / "summary.json"
    args = ["produce", "--count", "1234", "--seed", "1", "--no-progress", "--summary-file", str(summary_file), *mode]
    assert cli.main(args) == 0
    assert len(kinesis.data) == 1234
    written = read_run_summary(summary_file)
    assert written is not None
    sent = written.producer
    assert sent.records == sent.sent + sent.failed + sent.unsendable + sent.unsent == 1234
    if written.generator is not None:
        assert written.generator["records"] == 1234, "generated = sent: nothing held back"
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"{written.mode}:"), "the first line says what the run sends"


def test_a_file_sends_its_first_lines_and_refuses_a_count_it_does_not_hold(settings: Settings, tmp_path: Path) -> None:
    path = payload_file(tmp_path / "payloads.jsonl", 10)
    plan = plan_production(settings, seed=1, mix=MIX, count=4, from_file=path)
    assert [json.loads(record.data)["n"] for record in plan.records] == [0, 1, 2, 3]
    with pytest.raises(ConfigError, match="holds only 10 payloads"):
        plan_production(settings, seed=1, mix=MIX, count=11, from_file=path)


def test_live_without_a_rate_runs_at_the_streams_write_limit_for_a_count(kinesis: FourShards) -> None:
    rate, why = live_rate(kinesis, "s", count=5000, rate=None)
    assert rate == 4 * 1000
    assert "write limit" in why
    assert live_rate(kinesis, "s", count=None, rate=None)[0] == DEFAULT_LIVE_RATE
    assert live_rate(kinesis, "s", count=5000, rate=123.0) == (123.0, "--rate")


def test_the_plan_states_the_rate_and_the_run(settings: Settings, kinesis: FourShards) -> None:
    plan = plan_production(settings, seed=3, mix=MIX, count=5000)
    assert plan.mode == "live"
    assert plan.generator is not None
    assert plan.generator.config.records == 5000
    assert plan.options == {"append_truth": True, "pace": True}
    assert "4,000 records/s" in plan.description
    assert plan.generator.run_id in plan.description
    backfill = plan_production(settings, seed=3, mix=MIX, count=5000, backfill_hours=1, rate=800)
    assert backfill.options["rate_limit"] == 800
    assert backfill.generator is not None
    assert backfill.generator.config.records == 5000


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "--count RECORDS or --duration SECONDS"),
        ({"count": 10, "duration": 5.0}, "--count RECORDS or --duration SECONDS"),
        ({"count": 0}, "at least 1"),
        ({"count": 10, "rate": -1.0}, "positive number of records per second"),
    ],
)
def test_live_options_that_do_not_fit_are_refused(settings: Settings, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_production(settings, seed=1, mix=MIX, **options)


def test_the_run_summary_records_where_an_open_live_run_ended(kinesis: FourShards, settings: Settings) -> None:
    assert cli.main(["produce", "--count", "500", "--rate", "50000", "--seed", "2", "--no-progress"]) == 0
    summary = read_run_summary(run_summary_path(settings, "live"))
    assert summary is not None
    assert summary.window_start is not None
    assert summary.window_end is not None
    assert summary.window_end > summary.window_start
    assert summary.run_id is not None
    events = [json.loads(data) for data in kinesis.data if reject_reason(data) is None]
    assert events
    assert {event["properties"]["run_id"] for event in events} == {summary.run_id}
