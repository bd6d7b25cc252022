"""Which children a failed Spark start ends: pyspark's gateway JVM, and nothing else of ours."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from icestream.runtime.gateway import children, end_unstarted_gateway, is_gateway

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds children through /proc")


def test_only_the_new_gateway_child_is_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkContext

    # A start that never came up: in a test worker that already runs the shared session, pyspark
    # holds that session's gateway, and end_unstarted_gateway rightly leaves everything alone.
    monkeypatch.setattr(SparkContext, "_gateway", None)
    older = subprocess.Popen(["sleep", "60"], env={**os.environ, "_PYSPARK_DRIVER_CONN_INFO_PATH": "/gone/x"})
    before = children()
    gateway = subprocess.Popen(["sleep", "60"], env={**os.environ, "_PYSPARK_DRIVER_CONN_INFO_PATH": "/gone/y"})
    other = subprocess.Popen(["sleep", "60"])
    try:
        assert {older.pid, gateway.pid, other.pid} <= children()
        assert (is_gateway(gateway.pid), is_gateway(other.pid)) == (True, False)
        assert end_unstarted_gateway(before) == [gateway.pid]
        assert gateway.wait(timeout=5) is not None
        assert older.poll() is None  # it ran before the start
        assert other.poll() is None  # another program
    finally:
        for process in (older, gateway, other):
            process.kill()
            process.wait()
