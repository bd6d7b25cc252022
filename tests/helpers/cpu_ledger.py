"""A pytest plugin that writes each test's CPU, its own and its process tree's, to a ledger file.

Wall time on a 2-core machine says which test waited; CPU says which one cost. The suite is
CPU-bound (both cores busy), so its length is the CPU it spends divided by two, and this ledger is
where that CPU goes. Loaded by tests/conftest.py when ``TEST_CPU_LEDGER=<file>`` is set;
``bench/bench_test_cpu.py`` runs the suite with it and prints the sums.

A test's CPU is what its worker's process tree spent between the test's start and its end: the
worker, the JVM it drives, the servers and drivers its fixtures started, and every child they reaped.
A server started for many tests is charged to whichever test was running while it worked. The
worker becomes its tree's subreaper, so a JVM orphaned by a SIGKILLed driver stays in the tree and is
counted; the worker reaps such orphans (never a child a ``Popen`` waits for) after each test.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

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


def _reap_orphans() -> None:
    """Reap the worker's dead adopted children; a Popen's own child is left to the Popen."""
    owned = {popen.pid for popen in list(_POPENS)}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in owned:
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, parent = text[text.rindex(")") + 2 :].split()[:2]
        if state == "Z" and int(parent) == me:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(entry), os.WNOHANG)


def _stat_fields(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children), None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    # After the name: state ppid ... utime(14th field overall) stime cutime cstime.
    return int(fields[1]), sum(int(value) for value in fields[11:15]) / TICKS


def tree_cpu(root: int) -> float:
    """CPU seconds the process ``root`` and all its living descendants (with what they reaped) spent."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat_fields(entry)) is not None:
            parents[int(entry)], cpu[int(entry)] = fields
    total = 0.0
    for pid, seconds in cpu.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == root:
            total += seconds
    return total


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
