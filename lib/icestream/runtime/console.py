"""What a Spark session prints to the console beside Spark's log4j settings (``log4j2.properties``).

Two things came before icestream's own one-line messages on Spark 4, and are kept out here.

The JVM's standard error: Spark 4's launcher starts every JVM with ``--add-modules=jdk.incubator.vector``
(``org.apache.spark.launcher.JavaModuleOptions``), and the JVM then writes
``WARNING: Using incubator modules: jdk.incubator.vector`` to its standard error at start-up, which
no JVM option silences. It came before a command's one-line error and into the first cell of
every notebook that starts a session. :func:`filtered_stderr` hands the JVM (which inherits the
file descriptor) a pipe instead, and a thread passes every other byte on to this process's
standard error as it comes: Spark's own warnings (the console appender of ``log4j2.properties``)
still arrive where they did.

pyspark's error logs: pyspark 4 logs every SQL or DataFrame error it raises, as JSON with the
whole JVM stack trace, to stderr (``pyspark.errors.exceptions.base``, when the exception is made).
A user saw that trace before icestream's one-line error, and a test's expected failure printed it
too. The exception keeps every word of it; :func:`quiet_query_context_loggers` silences the copy.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator

QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
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


def quiet_query_context_loggers() -> None:
    """Silence pyspark 4's stack-trace logs of raised query errors (pyspark 3.5 has none)."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:
        return
    for name in QUERY_CONTEXT_LOGGERS:
        # Made by pyspark's own getLogger: a plain logging.Logger of that name would reject the
        # keyword arguments pyspark logs with.
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
