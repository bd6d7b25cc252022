"""The crash demo's plumbing: its names, the ingest process's environment, a process group's end (no JVM)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from icestream.config import load_settings
from icestream.demos.crash import (
    CrashDemo,
    crash_demo_settings,
    ingest_environment,
    ingest_settings,
    processes_in_group,
)


def test_the_demo_has_a_stream_and_tables_of_its_own() -> None:
    settings = load_settings(profile="local")
    demo = crash_demo_settings(settings)
    assert demo.stream_name == f"{settings.stream_name}-crash-demo"
    assert demo.table_name == settings.companion_table_name("crash_demo")


def test_the_ingest_process_loads_the_demo_settings_from_its_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    demo = crash_demo_settings(load_settings(profile="local", kinesis_endpoint="http://127.0.0.1:4567"))
    environment = ingest_environment(demo, tmp_path)
    for name, value in environment.items():
        if name.startswith("ICESTREAM_"):
            monkeypatch.setenv(name, value)
    loaded = load_settings()
    assert (loaded.stream_name, loaded.table_name) == (demo.stream_name, demo.table_name)
    assert loaded.path("run_dir") == tmp_path, "its progress file stays out of the workbook's run folder"
    assert loaded.kinesis_endpoint == "http://127.0.0.1:4567"


def test_the_shell_command_carries_the_variables_that_make_it_the_demo_s_ingest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = load_settings(profile="local", kinesis_endpoint="http://127.0.0.1:4567")
    demo = crash_demo_settings(settings)
    crash = CrashDemo(demo, pd.DataFrame(), ingest_environment(demo, tmp_path))
    line = crash.shell_command("--available-now", "--pause-at", "between_commits:2")
    words = shlex.split(line)  # as a shell reads it
    start = words.index("icestream")
    assignments, command = words[:start], words[start:]
    assert command == ["icestream", "ingest", "--available-now", "--pause-at", "between_commits:2"]
    for name, value in (word.split("=", 1) for word in assignments):
        monkeypatch.setenv(name, value)
    loaded = load_settings()  # what the pasted line's icestream loads
    assert (loaded.stream_name, loaded.table_name) == (demo.stream_name, demo.table_name)
    assert loaded.path("run_dir") == tmp_path
    assert loaded.kinesis_endpoint == "http://127.0.0.1:4567"
    assert len(assignments) < 8, "only the variables that differ from this environment's settings"


def test_the_restart_in_the_notebook_session_runs_in_the_demo_folder(tmp_path: Path) -> None:
    demo = crash_demo_settings(load_settings(profile="local", kinesis_endpoint="http://127.0.0.1:4567"))
    restart = ingest_settings(demo, tmp_path)
    assert (restart.stream_name, restart.table_name) == (demo.stream_name, demo.table_name)
    assert restart.path("run_dir") == tmp_path, "its progress file stays out of the workbook's run folder"
    assert restart.kinesis_endpoint == "http://127.0.0.1:4567"


def test_processes_in_group_sees_a_group_until_it_is_killed() -> None:
    sleep = "import time; time.sleep(60)"
    child = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {sleep!r}]); {sleep}"  # a JVM's stand-in
    process = subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
    try:
        assert processes_in_group(process.pid, wait=0) != []
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert processes_in_group(process.pid, wait=10) == [], "the grandchild went with the group"
