"""Ending the JVM of a Spark start that never came up, so an interrupt leaves no process behind.

pyspark's ``launch_gateway`` starts the driver JVM with SIGINT ignored, waits for it to write its
port into a file in a temporary folder, and on Ctrl-C removes the folder without ending the JVM.
The JVM then fails to write the file (``NoSuchFileException``), never reaches the loop that ends it
when the Python side's pipe closes, and py4j's listening thread keeps it running for ever,
reparented to init. pyspark keeps no handle on it once the exception is raised, so
:func:`end_unstarted_gateway` finds it among this process's children by the variable pyspark
hands it. Where ``/proc`` is missing (macOS) nothing is found and nothing is ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

# pyspark gives the JVM it launches this variable (where to write its port); the JVM reads it too.
_GATEWAY_VARIABLE = b"_PYSPARK_DRIVER_CONN_INFO_PATH="
_EXEC_WAIT_SECONDS = 2.0  # how long a child caught inside fork() or exec() may take to show its variables
_POLL_SECONDS = 0.05


def children() -> set[int]:
    """The pids of this process's children (empty without ``/proc``)."""
    parent = str(os.getpid())
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            # The command name (field 2) may hold spaces; the parent pid is the 2nd field after it.
            if stat.read_text().rsplit(")", 1)[1].split()[1] == parent:
                found.add(int(stat.parent.name))
    return found


def is_gateway(pid: int) -> bool | None:
    """Whether a child of ours is pyspark's gateway JVM (or the spark-submit script that becomes it).

    Returns:
        True or False, or None while it cannot tell: the child is inside exec() (its variables read
        as empty) or is a fork of this interpreter that has not exec'ed yet, or it has ended.
    """
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        program = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None
    if any(variable.startswith(_GATEWAY_VARIABLE) for variable in environ.split(b"\0")):
        return True
    if not environ or program == os.readlink("/proc/self/exe"):
        return None
    return False


def end_unstarted_gateway(before: set[int]) -> list[int]:
    """SIGKILL the gateway JVM of a start that failed or was interrupted before pyspark kept it.

    A JVM that did come up (``SparkContext._gateway`` is set) is left alone: pyspark reuses it, and
    it exits by itself when this process ends and its pipe closes.

    Args:
        before: The children that ran before the start (:func:`children`); none of them is ended.

    Returns:
        The pids ended.
    """
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        return []
    undecided = children() - before
    deadline = time.monotonic() + _EXEC_WAIT_SECONDS
    ended = []
    while undecided:
        for pid in sorted(undecided):
            verdict = is_gateway(pid)
            if verdict is None and time.monotonic() < deadline:
                continue  # caught between fork() and the JVM's exec(): look again
            undecided.discard(pid)
            if verdict:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # it holds no session yet: nothing to shut down cleanly
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)  # our child: collected, so no zombie is left either
                ended.append(pid)
        if undecided:
            time.sleep(_POLL_SECONDS)
    return ended
