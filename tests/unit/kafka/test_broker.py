"""The local Kafka broker without a JVM: its server.properties, its cluster id, and the one-line refusals.

tests/integration/test_kafka_broker.py starts the real broker.
"""

from __future__ import annotations

import base64
import re
import sys
from pathlib import Path

import pytest

from icestream import cli
from icestream.errors import KafkaBrokerError
from icestream.kafka import broker as broker_module
from icestream.kafka import jvm as jvm_module
from icestream.kafka.broker import LOOPBACK, Broker, cluster_id, server_properties
from icestream.runtime import processes


def parsed(text: str) -> dict[str, str]:
    entries = [line for line in text.splitlines() if line and not line.startswith("#")]
    return dict(entry.split("=", 1) for entry in entries)


def test_the_properties_name_one_kraft_node_on_loopback_with_its_folders(tmp_path: Path) -> None:
    data, metadata = tmp_path / "run" / "kafka" / "data", tmp_path / "run" / "kafka" / "metadata"
    properties = parsed(server_properties(data, metadata, broker_port=40001, controller_port=40002))
    assert properties["process.roles"] == "broker,controller"
    assert properties["node.id"] == "1"
    assert properties["controller.quorum.voters"] == "1@127.0.0.1:40002"
    assert properties["listeners"] == "PLAINTEXT://127.0.0.1:40001,CONTROLLER://127.0.0.1:40002"
    assert properties["advertised.listeners"] == "PLAINTEXT://127.0.0.1:40001"  # clients never see the controller
    assert properties["controller.listener.names"] == "CONTROLLER"
    assert properties["log.dirs"] == str(data)
    assert properties["metadata.log.dir"] == str(metadata)
    assert not [key for key in properties if key.startswith("zookeeper")]
    # Loopback only: every address any setting names is 127.0.0.1, none is a wildcard or a host name.
    addresses = re.findall(r"(?:://|@)([^:,/]*):\d+", "\n".join(properties.values()))
    assert len(addresses) == 4
    assert set(addresses) == {LOOPBACK}
    # One replica of every internal topic: a one-node cluster could not place a second.
    replicas = {key: value for key, value in properties.items() if key.endswith("replication.factor")}
    assert len(replicas) >= 3
    assert set(replicas.values()) == {"1"}
    # No no-op metadata records every 500 ms: a third of an idle node's CPU, and no other broker to read them.
    assert properties["metadata.max.idle.interval.ms"] == "0"


def test_a_cluster_id_is_sixteen_bytes_of_url_safe_base64_never_read_as_an_option() -> None:
    ids = {cluster_id() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22
        assert not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16


@pytest.fixture
def broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Broker:
    """A broker in a temporary run folder whose Java is a 17 and whose jars are none (nothing is started)."""
    monkeypatch.setattr(jvm_module, "java_version", lambda: (17, "/usr/bin/java"))
    monkeypatch.setattr(Broker, "jars", lambda self: [])
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path / "run"))
    return Broker(tmp_path / "run", tmp_path / "jars")


def one_line(error: pytest.ExceptionInfo[KafkaBrokerError]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_data_folder_kafka_did_not_format_is_refused_before_any_jvm(broker: Broker) -> None:
    (broker.data).mkdir(parents=True)
    (broker.data / "00000000000000000000.log").write_text("left from somewhere else")
    with pytest.raises(KafkaBrokerError) as error:
        broker.start()
    message = one_line(error)
    assert f"{broker.folder} is stale" in message
    assert f"rm -r {broker.folder}" in message
    assert not broker.state_file.exists()


def test_a_half_formatted_data_folder_is_refused_too(broker: Broker) -> None:
    broker.data.mkdir(parents=True)
    (broker.data / "meta.properties").write_text("cluster.id=x\nnode.id=1\nversion=1\n")
    with pytest.raises(KafkaBrokerError) as error:
        broker.start()
    assert f"({broker.metadata} has no meta.properties" in one_line(error)


def test_a_port_in_use_is_refused_with_what_to_do(broker: Broker) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(KafkaBrokerError) as error:
            broker.start(port=port)
    assert one_line(error).startswith(f"Port {port} on 127.0.0.1 is in use")
    assert not broker.state_file.exists()


def test_an_old_java_is_refused(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jvm_module, "java_version", lambda: (11, "/usr/lib/jvm/java-11/bin/java"))
    with pytest.raises(KafkaBrokerError) as error:
        broker.start()
    assert "Java 11; Kafka 4 needs Java 17" in one_line(error)


def test_a_broker_that_exits_at_start_names_the_cause_its_log_gives(broker: Broker) -> None:
    broker.run_dir.mkdir(parents=True)
    broker.log.write_text(
        "ERROR Exiting Kafka due to fatal exception\njava.net.BindException: Address already in use\n"
    )
    assert "a port it was given is in use" in broker._exit_message(1)
    broker.log.write_text("ERROR Exiting Kafka\norg.apache.kafka.common.errors.InconsistentClusterIdException: x\n")
    assert f"data folder {broker.folder} does not fit" in broker._exit_message(1)
    broker.log.write_text("something else\n")
    assert broker._exit_message(3) == f"The Kafka broker exited at start (code 3); see {broker.log}."


def test_status_and_stop_without_a_broker_say_how_to_start_one(
    broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["kafka", "status"]) == 1
    assert capsys.readouterr().out == "not running; start it with `icestream kafka start`\n"
    assert cli.main(["kafka", "stop"]) == 0
    assert capsys.readouterr().out == "not running\n"


def test_a_second_start_says_one_runs_and_starts_nothing(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A stand-in process whose command line carries the broker's marks, recorded as a start would.
    broker.run_dir.mkdir(parents=True)
    command = [sys.executable, "-c", "import time; time.sleep(120)", "kafka.Kafka", str(broker.properties)]
    stand_in = processes.spawn(command, broker.log)
    try:
        processes.write_state(
            broker.state_file,
            stand_in.pid,
            bootstrap="127.0.0.1:40001",
            broker_port=40001,
            controller_port=40002,
            started_at=0.0,
            log=str(broker.log),
            properties=str(broker.properties),
        )
        monkeypatch.setattr(broker_module, "answers", lambda bootstrap, timeout=5.0: bootstrap == "127.0.0.1:40001")
        spawned: list[object] = []
        monkeypatch.setattr(processes, "spawn", lambda *args, **kwargs: spawned.append(args))
        assert cli.main(["kafka", "start"]) == 0
        out = capsys.readouterr().out
        assert out == f"already running: 127.0.0.1:40001 (pid {stand_in.pid}); stop it with `icestream kafka stop`\n"
        assert spawned == []
        assert cli.main(["kafka", "status"]) == 0
        assert capsys.readouterr().out == f"running: 127.0.0.1:40001 (pid {stand_in.pid})\n"
        assert broker.stop() is True
        assert not processes.running(stand_in.pid)
    finally:
        if stand_in.poll() is None:
            stand_in.kill()
            stand_in.wait()
