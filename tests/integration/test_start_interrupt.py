"""Ctrl-C at any moment of a Spark session's start-up leaves no JVM behind (issue 43, item 4).

A small Python process calls ``get_spark`` with an application name no other process has; that
name is on the command line of the JVM it starts (``--conf spark.app.name=...``), so the marked
processes are exactly the ones this start made. SIGINT is sent at points found by looking, not by
waiting a number of seconds: before the JVM exists, once the launcher runs as our child, once it
has become the JVM, once the JVM listens (py4j's gateway, just before it writes its connection
file), and after the session is up. Whatever the point, no marked process may outlive the parent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.waiting import wait_until

CHILD = """
import sys
from icestream.runtime.spark import get_spark
print("starting", flush=True)
get_spark(app_name=sys.argv[1])
print("ready", flush=True)
import time
time.sleep(600)
"""


def marked(marker: str) -> dict[int, int]:
    """The processes whose command line holds ``marker``: pid to parent pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if marker.encode() in command:
            found[int(entry.name)] = parent
    return found


def is_java(pid: int) -> bool:
    """True once the process has exec'ed the JVM (spark-submit is a shell script that execs java)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name == "java"
    except OSError:
        return False


def listens(pid: int) -> bool:
    """True when the process holds a listening TCP socket (py4j's gateway server)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
        sockets = set()
        for fd in fds:
            target = os.readlink(fd)
            if target.startswith("socket:["):
                sockets.add(target[len("socket:[") : -1])
        lines = [*Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]]
        lines += Path(f"/proc/{pid}/net/tcp6").read_text().splitlines()[1:]
    except OSError:
        return False
    return any(fields[3] == "0A" and fields[9] in sockets for fields in (line.split() for line in lines))


def our_child(parent: int, marker: str, test: Callable[[int], bool]) -> Callable[[], bool]:
    """A condition: a marked child of ``parent`` exists and passes ``test``."""
    return lambda: any(ppid == parent and test(pid) for pid, ppid in marked(marker).items())


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds processes through /proc")
@pytest.mark.parametrize("point", ["before_jvm", "launcher", "jvm", "listening", "session_up"])
def test_sigint_during_start_leaves_no_jvm(test_home: Path, point: str) -> None:
    marker = f"icestream-interrupt-{uuid.uuid4().hex[:12]}"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, marker], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "starting"
        if point == "session_up":
            assert child.stdout.readline().strip() == "ready", child.stderr.read() if child.stderr else ""
        elif point != "before_jvm":
            test = {"launcher": lambda pid: True, "jvm": is_java, "listening": listens}[point]
            wait_until(our_child(child.pid, marker, test), 60, 0.02, f"the {point} as a child of the process")
        child.send_signal(signal.SIGINT)
        child.wait(timeout=60)
        # The JVM of a start that was under way ends; a Spark launcher (a short Java program that
        # only prints the JVM's command) may take a moment to finish: the bound is generous.
        try:
            wait_until(lambda: not marked(marker), 20, 0.2, f"no process named {marker} after the parent exited")
        except AssertionError:
            left = marked(marker)
            pytest.fail(f"SIGINT at {point} left {len(left)} process(es) behind (pid: parent pid): {left}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)  # a failed run leaves nothing running either
