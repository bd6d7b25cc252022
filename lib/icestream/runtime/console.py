"""The driver JVM's standard error, less the one line Spark 4's launcher makes every JVM print.

Spark 4's launcher starts every JVM with ``--add-modules=jdk.incubator.vector``
(``org.apache.spark.launcher.JavaModuleOptions``), and the JVM then writes
``WARNING: Using incubator modules: jdk.incubator.vector`` to its standard error at start-up, which
no JVM option silences. It came before a command's one-line error and into the first cell of
every notebook that starts a session. :func:`filtered_stderr` hands the JVM (which inherits the
file descriptor) a pipe instead, and a thread passes every other byte on to this process's
standard error as it comes: Spark's own warnings (the console appender of ``log4j2.properties``)
still arrive where they did.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

DROPPED_LINES = (b"WARNING: Using incubator modules: jdk.incubator.vector",)
_CHUNK = 1 << 16


def without_dropped(pending: bytes, chunk: bytes) -> tuple[bytes, bytes]:
    """``(bytes to pass on, the unfinished last line kept back)`` for a chunk read after ``pending``."""
    text = pending + chunk
    complete, newline, rest = text.rpartition(b"\n")
    if not newline:
        return b"", text
    kept = [line for line in complete.split(b"\n") if line.rstrip(b"\r") not in DROPPED_LINES]
    return b"".join(line + b"\n" for line in kept), rest


def _forward(source: int, target: int) -> None:
    pending = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(source, _CHUNK):
            out, pending = without_dropped(pending, chunk)
            if out:
                os.write(target, out)
        if pending and pending.rstrip(b"\r") not in DROPPED_LINES:
            os.write(target, pending)
    os.close(source)
    os.close(target)


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
    """While the block starts a child process, make the child's standard error a filtered pipe.

    Only the processes started inside the block get the pipe (they keep it for their life); this
    process's own standard error is back as it was when the block ends.
    """
    try:
        original = os.dup(2)
    except OSError:  # no standard error at all: nothing to filter
        yield
        return
    read_end, write_end = os.pipe()
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)
    forward_to = os.dup(original)
    threading.Thread(target=_forward, args=(read_end, forward_to), daemon=True, name="jvm-stderr").start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)
        os.close(original)
