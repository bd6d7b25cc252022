"""Process handling shared by the emulator and the background producer: state, ownership, stop, reap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from icestream.runtime import processes
from tests.helpers.waiting import wait_until

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)  # icestream-test-sleeper"]
# Ignores SIGTERM, so only the SIGKILL after the timeout ends it.
STUBBORN = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)  # icestream-test-stubborn"]  # fmt: skip


@pytest.fixture
def started(tmp_path: Path):
    """Processes started by a test, killed afterwards if the test left them running."""
    spawned: list[subprocess.Popen[bytes]] = []

    def start(command: list[str]) -> subprocess.Popen[bytes]:
        process = processes.spawn(command, tmp_path / "child.log")
        spawned.append(process)
        return process

    yield start
    for process in spawned:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_state_file_records_pid_and_start_time(tmp_path: Path, started) -> None:
    process = started(SLEEPER)
    written = processes.write_state(tmp_path / "run" / "x.json", process.pid, port=7)
    assert processes.read_state(tmp_path / "run" / "x.json") == written
    assert written["pid"] == process.pid
    assert written["port"] == 7
    assert written["process_start"] == processes.start_time(process.pid) != ""
    assert processes.read_state(tmp_path / "absent.json") is None
    (tmp_path / "broken.json").write_text("{not json")
    assert processes.read_state(tmp_path / "broken.json") is None


def test_a_process_is_ours_only_with_its_start_time_and_command(tmp_path: Path, started) -> None:
    process = started(SLEEPER)
    state = processes.write_state(tmp_path / "x.json", process.pid)
    # Past exec(): caught inside it (an empty command line, seen under load) any marks pass (the next test).
    wait_until(lambda: processes.command_line(process.pid), timeout=30, message="the sleeper's command line")
    assert processes.is_ours(state, ("icestream-test-sleeper",))
    assert not processes.is_ours(state, ("icestream.kinesis.emulator",)), "another command"
    assert not processes.is_ours({**state, "process_start": "1"}, ("icestream-test-sleeper",)), "a reused pid"
    assert not processes.is_ours({"pid": 0}, ())


def test_a_process_caught_inside_exec_is_ours_by_its_start_time(tmp_path: Path, started, monkeypatch) -> None:
    # Popen returns once exec() has closed the starter's pipe, a moment before the kernel sets the new
    # command line: read then, /proc/<pid>/cmdline is empty (seen once under load, as "not running").
    process = started(SLEEPER)
    state = processes.write_state(tmp_path / "x.json", process.pid)
    monkeypatch.setattr(processes, "command_line", lambda pid: "")
    assert processes.is_ours(state, ("icestream-test-sleeper",))
    assert not processes.is_ours({**state, "process_start": "1"}, ("icestream-test-sleeper",)), "a reused pid"


def test_a_process_is_spawned_in_its_own_session_with_a_log(tmp_path: Path, started) -> None:
    sleeper = started(SLEEPER)
    assert os.getsid(sleeper.pid) == os.getpgid(sleeper.pid) == sleeper.pid, "it leads its own session"
    talker = started([sys.executable, "-c", "print('hello from the child')"])
    assert talker.wait(timeout=30) == 0
    assert "hello from the child" in (tmp_path / "child.log").read_text()


def test_terminate_ends_a_process_and_reaps_it(tmp_path: Path, started) -> None:
    process = started(SLEEPER)
    state = processes.write_state(tmp_path / "x.json", process.pid)
    processes.terminate(process.pid, timeout=10)
    assert not processes.running(process.pid)
    assert not processes.alive(process.pid), "collected: no zombie left behind"
    assert not processes.is_ours(state, ())


def test_terminate_kills_a_process_that_ignores_sigterm(tmp_path: Path, started) -> None:
    process = started(STUBBORN)
    log = tmp_path / "child.log"

    def ready() -> bool:
        assert process.poll() is None, log.read_text()
        return "ready" in log.read_text()

    wait_until(ready, timeout=30, interval=0.05, message="the child to ignore SIGTERM (it prints 'ready')")
    processes.terminate(process.pid, timeout=0.5)
    # terminate waits a little after SIGKILL; on a loaded machine the end may come later: not a hang
    wait_until(lambda: not processes.running(process.pid), timeout=30, interval=0.05, message="the child to end")
    assert not processes.alive(process.pid)


def test_an_ended_child_is_a_zombie_until_reaped(started) -> None:
    process = started([sys.executable, "-c", "pass"])

    def zombie() -> bool:
        assert processes.alive(process.pid)
        return processes.is_zombie(process.pid)  # ended, its status not collected yet

    wait_until(zombie, timeout=30, interval=0.05, message="the child to end (a zombie until reaped)")
    assert not processes.running(process.pid), "running() counts a zombie as ended and collects it"
    assert not processes.alive(process.pid)
    assert processes.reap(process.pid) is False, "nothing left to collect"
