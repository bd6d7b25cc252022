"""The local Kafka broker for real: a KRaft node from the stack's jars, started, used and stopped by this test.

The broker runs in this test's own run folder, so it never meets the workbook's (``data/run``) or
another test's; it starts twice (the second time on the data the first left), and after each stop no
JVM of it is left. Its jars come from the project's cache (``make setup`` resolves them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from icestream import cli
from icestream.config import load_settings
from icestream.kafka.broker import Broker
from icestream.kafka.connection import KafkaConnection
from tests.helpers import topics

TOPIC = "broker-check"
RECORDS = [(f"key-{number}".encode(), f"value-{number}".encode()) for number in range(5)]


@pytest.fixture
def broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Broker]:
    """The broker of a run folder of this test's own; stopped at the end whatever happened."""
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path / "run"))
    local = Broker.from_settings(load_settings())
    try:
        yield local
    finally:
        local.stop()


def command(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    code = cli.main(["kafka", *words])
    return code, capsys.readouterr().out


def broker_jvms(properties: Path) -> list[int]:
    """Pids of running processes whose command line is this broker's (``kafka.Kafka <its properties>``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"kafka.Kafka" in words and str(properties).encode() in words and state != "Z":
            found.append(int(entry.name))
    return found


def consume(bootstrap: str, group: str, count: int) -> list[tuple[bytes, bytes]]:
    """Read ``count`` records of the topic from its start: (key, value) each."""
    found = topics.consume(KafkaConnection(bootstrap, TOPIC), count, group)
    return [(key, value) for _, _, key, value in found]


def test_start_status_produce_consume_stop_and_start_again_on_the_same_data(
    broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = command(capsys, "start")
    assert code == 0
    bootstrap = out.strip()
    assert re.fullmatch(r"127\.0\.0\.1:\d+", bootstrap), out
    state = json.loads(broker.state_file.read_text())
    assert state["bootstrap"] == bootstrap
    pid = state["pid"]

    # A second start finds it, says so in one line, and starts nothing.
    code, out = command(capsys, "start")
    assert code == 0
    assert out == f"already running: {bootstrap} (pid {pid}); stop it with `icestream kafka stop`\n"
    assert broker_jvms(broker.properties) == [pid]
    code, out = command(capsys, "status")
    assert (code, out) == (0, f"running: {bootstrap} (pid {pid})\n")

    # Everything it keeps is under the run folder.
    assert (broker.data / "meta.properties").is_file()
    assert (broker.metadata / "__cluster_metadata-0").is_dir()
    assert broker.log.is_file()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])[TOPIC].result(timeout=30)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for key, value in RECORDS:
        producer.produce(TOPIC, key=key, value=value)
    assert producer.flush(30) == 0
    assert sorted(consume(bootstrap, "first", len(RECORDS))) == RECORDS

    code, out = command(capsys, "stop")
    assert (code, out) == (0, "stopped\n")
    assert broker_jvms(broker.properties) == []
    assert not broker.state_file.exists()
    code, out = command(capsys, "status")
    assert code == 1
    assert "not running" in out

    # Started again, on new ports, over the data the first run left: the topic and its records are there.
    code, out = command(capsys, "start")
    assert code == 0
    again = out.strip()
    assert re.fullmatch(r"127\.0\.0\.1:\d+", again), out
    assert sorted(consume(again, "second", len(RECORDS))) == RECORDS
    code, out = command(capsys, "stop")
    assert (code, out) == (0, "stopped\n")
    assert broker_jvms(broker.properties) == []
