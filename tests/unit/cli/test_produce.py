"""``icestream produce --to kafka``: the options that do not fit Kafka, a missing or silent broker, each one line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from icestream import cli
from icestream.config import Settings, load_settings
from icestream.kafka import topics
from icestream.producer import background, kafka_send
from icestream.producer.run import read_run_summary, run_summary_path
from tests.helpers.fake_kafka import FakeKafkaProducer
from tests.unit.conftest import SilentEndpoint


@pytest.fixture
def run_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings whose run folder is ``tmp_path``, where no Kafka broker has run (exported, as the CLI reads them)."""
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path))
    monkeypatch.delenv("ICESTREAM_KAFKA_BOOTSTRAP", raising=False)
    return load_settings()


def refusal(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    """Run ``icestream produce WORDS``; it must end in one ``error:`` line, exit 2; return the line."""
    assert cli.main(["produce", *words]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("error: ")
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["--aggregate", "5"], "--aggregate packs records in Kinesis's KPL format; Kafka batches records itself"),
        (["--stream", "s"], "--stream names a Kinesis stream; with --to kafka name the topic with --topic"),
    ],
)
def test_what_does_not_fit_kafka_is_refused_in_one_line(
    run_settings: Settings, capsys: pytest.CaptureFixture[str], words: list[str], says: str
) -> None:
    assert says in refusal(capsys, "--to", "kafka", "--backfill-hours", "1", "--count", "10", *words)


def test_a_topic_without_kafka_is_refused(run_settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert "--topic names a Kafka topic: add --to kafka" in refusal(capsys, "--topic", "t", "--count", "10")


def test_no_broker_is_one_line_naming_the_command_that_starts_one(
    run_settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refusal(capsys, "--to", "kafka", "--backfill-hours", "1", "--count", "10", "--no-progress")
    assert "No Kafka broker: start the local one with `icestream kafka start`" in line


def test_a_broker_that_never_answers_is_one_line(
    run_settings: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    silent_endpoint: SilentEndpoint,
) -> None:
    monkeypatch.setattr(topics, "TIMEOUT_SECONDS", 1.0)  # the metadata request's bound, shortened for the test
    address = silent_endpoint.removeprefix("http://")
    monkeypatch.setenv("ICESTREAM_KAFKA_BOOTSTRAP", address)
    line = refusal(capsys, "--to", "kafka", "--backfill-hours", "1", "--count", "10", "--no-progress")
    assert f"Kafka at {address} does not answer" in line
    assert silent_endpoint.connections() > 0, "the client did connect"


def test_a_kafka_backfill_through_the_command_writes_the_runs_summary(
    run_settings: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = FakeKafkaProducer()
    monkeypatch.setenv("ICESTREAM_KAFKA_BOOTSTRAP", "127.0.0.1:9")
    monkeypatch.setattr(kafka_send, "partitions", lambda connection: [0])
    monkeypatch.setattr(confluent_kafka, "Producer", lambda config: client)
    words = ["--to", "kafka", "--topic", "clicks", "--backfill-hours", "1", "--count", "200", "--seed", "2"]
    assert cli.main(["produce", *words, "--no-progress"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "to Kafka topic clicks, as fast as Kafka takes them (no --rate)" in first
    summary = read_run_summary(run_summary_path(run_settings, "backfill"))
    assert summary is not None
    assert (summary.target, summary.stream, summary.producer.sent) == ("kafka", "clicks", 200)
    assert {topic for topic, _, _ in client.delivered} == {"clicks"}


def test_the_background_producer_is_started_for_kafka_with_its_settings(
    run_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[tuple[list[str], dict[str, str]]] = []

    class Spawned:
        pid = os.getpid()  # a pid that is alive, whose command line is not a producer's

    def spawn(command: list[str], log: Path, env: dict[str, str]) -> Any:
        started.append((command, env))
        return Spawned()

    monkeypatch.setattr(background.processes, "spawn", spawn)
    settings = load_settings(kafka_bootstrap="127.0.0.1:9", kafka_topic="clicks")
    background.start_background_producer(settings, to="kafka", rate=20.0, count=40)
    [(command, env)] = started
    assert command[command.index("--to") + 1] == "kafka"
    assert (env["ICESTREAM_KAFKA_BOOTSTRAP"], env["ICESTREAM_KAFKA_TOPIC"]) == ("127.0.0.1:9", "clicks")
