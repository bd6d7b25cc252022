"""The driver JVM's standard error: every line passed on but the incubator-module warning."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from icestream.runtime.console import DROPPED_LINES, filtered_stderr, without_dropped

WARNING = DROPPED_LINES[0].decode()


def test_only_the_warning_line_is_dropped_and_an_unfinished_line_waits() -> None:
    out, pending = without_dropped(b"", f"12:00:01 WARN Utils: a real warning\n{WARNING}\nhalf a li".encode())
    assert out == b"12:00:01 WARN Utils: a real warning\n"
    assert pending == b"half a li"
    out, pending = without_dropped(pending, b"ne\n")
    assert (out, pending) == (b"half a line\n", b"")
    assert without_dropped(b"", b"said WARNING: Using incubator modules: jdk.incubator.vector too\n")[0] != b""


def test_a_child_started_inside_keeps_the_filter_for_its_life(capfd: pytest.CaptureFixture[str]) -> None:
    script = (
        "import sys, time; sys.stderr.write(sys.argv[1] + '\\n'); sys.stderr.flush(); time.sleep(0.3); "
        "sys.stderr.write('a warning Spark logs later\\n')"
    )
    with filtered_stderr():
        child = subprocess.Popen([sys.executable, "-c", script, WARNING])
    print("this process's own stderr is back", file=sys.stderr, flush=True)
    child.wait(timeout=30)
    captured = ""
    for _ in range(100):  # the forwarding thread passes the child's last line on as it comes
        captured += capfd.readouterr().err
        if "later" in captured:
            break
        time.sleep(0.05)
    assert "a warning Spark logs later" in captured
    assert WARNING not in captured
    assert "this process's own stderr is back" in captured
