"""A pytest plugin that writes each test's CPU, its own and its process tree's, to a ledger file.

Wall time on a 2-core machine says which test waited; CPU says which one cost. The suite is
CPU-bound (both cores busy), so its length is the CPU it spends divided by two, and this ledger is
where that CPU goes. Loaded by tests/conftest.py when ``TEST_CPU_LEDGER=<file>`` is set
(docs/testing.md, "Where the suite's CPU goes", gives the command and what it measured).

A test's CPU is what its worker's process tree spent between the test's start and its end: the
worker, the JVM it drives, the servers and drivers its fixtures started, and every child they reaped.
A server started for many tests is charged to whichever test was running while it worked. The
worker becomes its tree's subreaper, so a JVM orphaned by a SIGKILLed driver stays in the tree and is
counted; the worker reaps such orphans (never a child a ``Popen`` waits for) after each test.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from icestream.runtime.processes import reap

TICKS = os.sysconf("SC_CLK_TCK")
PR_SET_CHILD_SUBREAPER = 36
_POPENS: weakref.WeakSet[subprocess.Popen[bytes]] = weakref.WeakSet()


def pytest_configure(config: pytest.Config) -> None:
    """Adopt orphans (prctl) and remember every Popen, whose child its owner will reap."""
    if not os.environ.get("TEST_CPU_LEDGER"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    started = subprocess.Popen.__init__

    def remembered(self: subprocess.Popen[bytes], *args: object, **kwargs: object) -> None:
        started(self, *args, **kwargs)  # type: ignore[arg-type]
        _POPENS.add(self)

    subprocess.Popen.__init__ = remembered  # type: ignore[method-assign]


def _processes() -> dict[int, tuple[str, int, float]]:
    """Every process as (state, parent pid, CPU seconds of it and its reaped children), from ``/proc``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # ended while the folder was listed
        fields = text[text.rindex(")") + 2 :].split()
        # After the name: state ppid ... utime (the 14th field overall), stime, cutime, cstime.
        found[int(entry)] = (fields[0], int(fields[1]), sum(int(value) for value in fields[11:15]) / TICKS)
    return found


def tree_cpu(root: int) -> float:
    """CPU seconds the process ``root`` and all its living descendants (with what they reaped) spent."""
    processes = _processes()
    total = 0.0
    for pid, (_, _, seconds) in processes.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in processes:
            ancestor = processes[ancestor][1]
        if ancestor == root:
            total += seconds
    return total


def _reap_orphans() -> None:
    """Reap the worker's dead adopted children; a Popen's own child is left to the Popen."""
    owned = {popen.pid for popen in list(_POPENS)}
    me = os.getpid()
    for pid, (state, parent, _) in _processes().items():
        if state == "Z" and parent == me and pid not in owned:
            reap(pid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    ledger = os.environ.get("TEST_CPU_LEDGER")
    if not ledger:
        yield
        return
    start_wall, start_tree, start_own = time.monotonic(), tree_cpu(os.getpid()), time.process_time()
    yield
    record = {
        "test": item.nodeid,
        "wall": round(time.monotonic() - start_wall, 3),
        "cpu": round(tree_cpu(os.getpid()) - start_tree, 3),
        "worker_cpu": round(time.process_time() - start_own, 3),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
    }
    with open(ledger, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
    _reap_orphans()
