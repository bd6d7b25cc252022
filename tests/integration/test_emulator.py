"""The emulator's lifecycle: idempotent start, health, and stop that ends only its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from icestream.config import Settings, load_settings
from icestream.errors import ConfigError, ServiceUnavailableError
from icestream.kinesis.clients import check_kinesis, ensure_stream, kinesis_client, list_shards, resolve_endpoint
from icestream.kinesis.emulator import Emulator


def test_shared_emulator_answers(emulator: str, settings: Settings) -> None:
    assert emulator.startswith("http://127.0.0.1:")
    assert Emulator(settings.path("run_dir")).start() == emulator  # idempotent: same server
    assert resolve_endpoint(settings) == emulator
    assert emulator in check_kinesis(settings)


def test_stream_creation_is_idempotent(stream_settings: Settings) -> None:
    first = ensure_stream(stream_settings, shard_count=2)
    second = ensure_stream(stream_settings, shard_count=5)  # an existing stream keeps its shards
    assert first["StreamStatus"] == second["StreamStatus"] == "ACTIVE"
    assert second["OpenShardCount"] == 2
    assert len(list_shards(kinesis_client(stream_settings), stream_settings.stream_name)) == 2


def test_clients_read_arrival_times_as_utc(stream_settings: Settings) -> None:
    ensure_stream(stream_settings, shard_count=1)
    client = kinesis_client(stream_settings)
    before = datetime.now(UTC)
    client.put_record(StreamName=stream_settings.stream_name, Data=b"{}", PartitionKey="k")
    shard = list_shards(client, stream_settings.stream_name)[0]["ShardId"]
    iterator = client.get_shard_iterator(
        StreamName=stream_settings.stream_name, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    arrival = client.get_records(ShardIterator=iterator)["Records"][0]["ApproximateArrivalTimestamp"]
    assert arrival.tzinfo is UTC  # icestream.kinesis.clients.utc_timestamp, not botocore's tzlocal()
    assert abs((arrival - before).total_seconds()) < 60


def test_lifecycle_in_its_own_folder(tmp_path: Path) -> None:
    server = Emulator(tmp_path)
    assert not server.status().running
    endpoint = server.start()
    state = json.loads((tmp_path / "emulator.json").read_text())
    assert state["endpoint"] == endpoint
    assert server.status().healthy
    assert server.stop() is True
    assert not server.status().running
    assert not (tmp_path / "emulator.json").exists()
    assert server.stop() is False  # nothing left to stop


def test_stop_never_kills_a_process_it_did_not_start(tmp_path: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "emulator.json").write_text(
            json.dumps(
                {
                    "pid": bystander.pid,
                    "port": 1,
                    "endpoint": "http://127.0.0.1:1",
                    "process_start": "0",
                    "started_at": 0,
                    "log": "",
                }
            )
        )
        server = Emulator(tmp_path)
        assert not server.status().running
        server.stop()
        assert bystander.poll() is None, "the bystander must still run"
    finally:
        bystander.kill()
        bystander.wait()


def test_anything_needing_a_stopped_emulator_says_how_to_start_it(tmp_path: Path) -> None:
    settings = load_settings(run_dir=str(tmp_path))
    with pytest.raises(ServiceUnavailableError, match="icestream emulator start"):
        resolve_endpoint(settings)


def test_local_profile_never_sends_dummy_keys_off_the_machine() -> None:
    with pytest.raises(ConfigError, match="local profile only talks to an emulator"):
        resolve_endpoint(load_settings(kinesis_endpoint="https://kinesis.us-east-1.amazonaws.com"))


def test_unreachable_endpoint_is_one_clear_error(tmp_path: Path) -> None:
    from icestream.kinesis.emulator import free_port

    settings = load_settings(kinesis_endpoint=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ServiceUnavailableError, match="does not answer"):
        check_kinesis(settings)


# -- an emulator found on its port, whatever run folder started it (issue 58) -------------------------------


@pytest.fixture
def first_emulator(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """An emulator started from one run folder on a port of its own; its port and endpoint. Stopped after."""
    from icestream.kinesis.emulator import free_port

    port = free_port()
    server = Emulator(tmp_path / "first-run", port=port)
    endpoint = server.start()
    yield port, endpoint
    server.stop()


def _cli(args: list[str], tmp_path: Path, **env: str) -> tuple[int, str, str]:
    variables = {key: value for key, value in os.environ.items() if key != "ICESTREAM_KINESIS_ENDPOINT"}
    result = subprocess.run(
        [sys.executable, "-m", "icestream.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**variables, **env},
        cwd=tmp_path,
        check=False,
    )
    return result.returncode, result.stdout, result.stderr


def test_a_moved_run_folder_still_finds_the_emulator_on_its_port(first_emulator, tmp_path: Path) -> None:
    # setup had said "not running" while one ran: it looked for a state file in the new run folder only.
    port, endpoint = first_emulator
    moved = load_settings(run_dir=str(tmp_path / "moved-run"), emulator_port=port, stream_name="moved-1")
    assert resolve_endpoint(moved) == endpoint
    ensure_stream(moved, shard_count=1)
    before = load_settings(run_dir=str(tmp_path / "first-run"), stream_name="moved-1")
    assert "moved-1" in kinesis_client(before).list_streams()["StreamNames"], "the first emulator holds the stream"
    status = Emulator(tmp_path / "moved-run", port=port).status()
    assert (status.healthy, status.endpoint, status.found_on_port) == (True, endpoint, True)


def test_emulator_start_from_a_moved_run_folder_starts_no_second_one(first_emulator, tmp_path: Path) -> None:
    # `icestream emulator start` had started a second emulator, which did not see the first one's streams.
    port, endpoint = first_emulator
    env = {"ICESTREAM_RUN_DIR": str(tmp_path / "moved-run"), "ICESTREAM_EMULATOR_PORT": str(port)}
    code, out, err = _cli(["emulator", "start"], tmp_path, **env)
    assert (code, out.strip()) == (0, endpoint), err
    assert err.startswith(f"notice: the Kinesis emulator at {endpoint} was started with another run folder"), err
    assert not (tmp_path / "moved-run" / "emulator.json").exists(), "nothing was started here"
    code, out, _ = _cli(["emulator", "status"], tmp_path, **env)
    assert code == 0
    assert out.startswith("running (found on port"), out
    code, out, err = _cli(["emulator", "stop"], tmp_path, **env)
    assert (code, len(err.splitlines())) == (2, 1), err
    assert err.startswith(f"error: the Kinesis emulator at {endpoint} was started with another run folder"), err
    assert Emulator(tmp_path / "first-run").status().healthy, "stop leaves an emulator it did not start running"


def test_emulator_start_uses_the_configured_endpoints_port(tmp_path: Path) -> None:
    from icestream.kinesis.emulator import free_port

    port = free_port()
    env = {"ICESTREAM_RUN_DIR": str(tmp_path / "run"), "ICESTREAM_KINESIS_ENDPOINT": f"http://127.0.0.1:{port}"}
    try:
        code, out, err = _cli(["emulator", "start"], tmp_path, **env)
        assert (code, out.strip()) == (0, f"http://127.0.0.1:{port}"), err
    finally:
        Emulator(tmp_path / "run").stop()


def test_a_port_another_program_holds_is_refused_in_one_line(tmp_path: Path) -> None:
    import socket

    from icestream.errors import EmulatorError

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        port = squatter.getsockname()[1]
        with pytest.raises(EmulatorError, match=rf"port {port} on 127.0.0.1 is taken by a program that is not the "):
            Emulator(tmp_path / "run", port=port).start()
    assert not (tmp_path / "run" / "emulator.json").exists()
