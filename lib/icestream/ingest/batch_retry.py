"""Which failed batches are worth running again, and the batch retry loop that ``stop()`` interrupts.

Two levels retry. A read task retries each Kinesis call that failed transiently
(:mod:`icestream.ingest.call_retry`: throttling, 5xx answers, connection errors, timeouts) with paced
backoff, and gives up with :class:`~icestream.errors.ShardReadError`. The query retries a whole
batch from what the tables committed (:func:`run_with_retries`) when the batch failed transiently
(:func:`is_transient`): a service or the network, a read task that gave up, an Iceberg commit
that lost a race with a concurrent writer (compaction), or a test's simulated crash. Those can go
right next time. A programming error (``TypeError``, ``KeyError``, an ``AnalysisException`` about
a missing column...) fails the same way every time: the query stops at once with
:class:`~icestream.errors.IngestError` instead of retrying it, and the tables stay consistent.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from icestream.errors import IcestreamError, IngestError, InjectedFaultError, ServiceUnavailableError, ShardReadError
from icestream.ingest.call_retry import RETRYABLE_CODES, is_transient_call

T = TypeVar("T")

BASE_BACKOFF_SECONDS = 0.5  # a batch's first retry waits 1 s, then 2 s, 4 s ...
MAX_BACKOFF_SECONDS = 10.0

# Spark hands the driver a failed task's cause as text (the Python worker's traceback, a Java
# exception chain), not as the exception object: a transient cause is recognised by its name at
# the start of an exception line ("Name: message"), never in a quoted source line.
_TRANSIENT_NAMES = (
    "ShardReadError",
    "EndpointConnectionError",
    "ConnectionClosedError",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "ConnectionResetError",
    "ConnectionRefusedError",
    "CommitFailedException",
    "CommitStateUnknownException",
)
_TRANSIENT_TEXT = re.compile(
    rf"\b(?:{'|'.join(_TRANSIENT_NAMES)}): "
    rf"|An error occurred \((?:{'|'.join(sorted(RETRYABLE_CODES))})\)"
    # Iceberg's conflict checks against a concurrent commit (MergingSnapshotProducer, ...).
    r"|ValidationException: (?:Found (?:new )?conflicting|Found concurrently|Cannot commit, (?:found new|missing data)"
    r"|Missing required files)"
)
_CHAIN_LIMIT = 16  # causes followed in a Java exception chain


def _spark_text(error: BaseException) -> str | None:
    """What a Spark or Py4J error says about its causes; None for any other error."""
    from py4j.protocol import Py4JJavaError

    if isinstance(error, Py4JJavaError):
        lines: list[str] = []
        cause = error.java_exception
        while cause is not None and len(lines) < _CHAIN_LIMIT:
            lines.append(str(cause.toString()))
            cause = cause.getCause()
        return "\n".join(lines)
    description, stack = captured_parts(error)
    if description is not None:
        return f"{description}\n{stack or ''}"
    return None


def captured_parts(error: BaseException) -> tuple[str | None, str | None]:
    """A pyspark ``CapturedException``'s message and JVM stack trace; ``(None, None)`` for other errors.

    pyspark 3.5 keeps them as ``desc`` and ``stackTrace``, pyspark 4 as ``_desc`` and ``_stackTrace``.
    """
    for message, stack in (("desc", "stackTrace"), ("_desc", "_stackTrace")):
        if getattr(error, message, None) is not None:
            return str(getattr(error, message)), getattr(error, stack, None)
    return None, None


def is_transient(error: BaseException) -> bool:
    """True if a batch that failed with ``error`` may succeed when run again from the tables.

    Args:
        error: What the batch raised.

    Returns:
        True for transient failures (see the module docstring), False for programming errors and
        user errors (a bad transform, a table fed by another stream): retrying cannot fix those.
    """
    from pyspark.errors import AnalysisException

    if isinstance(error, ShardReadError | InjectedFaultError | ServiceUnavailableError):
        return True
    if isinstance(error, IcestreamError | AnalysisException):
        return False
    if is_transient_call(error):
        return True
    text = _spark_text(error)
    return text is not None and _TRANSIENT_TEXT.search(text) is not None


def describe(error: BaseException) -> str:
    """The error's type, its most telling line and its root cause's (a Python worker's last line; no JVM trace).

    A Java error's first line often names only the operation ("Failed to create file: ...") while the
    cause a user can act on ("Operation not permitted", "Permission denied", "No space left on device")
    is the last exception of its chain: both are given, the cause after ``caused by``.
    """
    text = captured_parts(error)[0]
    java = getattr(error, "java_exception", None)
    if text is None:
        text = java.toString() if java is not None else str(error)
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if "Traceback (most recent call last):" in lines:
        lines.reverse()  # a Python worker's traceback: the exception is its last line
    head = lines[0][:500] if lines else ""
    root = _root_cause(java) if java is not None else None
    if root and root not in head:
        return f"{type(error).__name__}: {head} (caused by {root[:300]})"
    return f"{type(error).__name__}: {head}"


def _root_cause(java: Any) -> str | None:
    """The first line of the last exception in a Java exception's chain of causes; None if it has none."""
    cause, last = java.getCause(), None
    for _ in range(_CHAIN_LIMIT):
        if cause is None:
            break
        last, cause = cause, cause.getCause()
    if last is None:
        return None
    lines = [line.strip() for line in str(last.toString()).splitlines() if line.strip()]
    return lines[0] if lines else None


def backoff_seconds(failures: int) -> float:
    """The wait before the retry that follows the ``failures``-th failure in a row."""
    return min(MAX_BACKOFF_SECONDS, BASE_BACKOFF_SECONDS * 2**failures)


def run_with_retries(
    attempt: Callable[[], T],
    recover: Callable[[], None],
    retries: int,
    stop: threading.Event,
    backoff: Callable[[int], float] = backoff_seconds,
) -> T | None:
    """Run ``attempt``; after a transient failure, wait, ``recover()`` and run it again.

    The waits are ``stop.wait(...)``: setting ``stop`` (``IngestQuery.stop()``) ends a wait at once.

    Args:
        attempt: One batch.
        recover: Reloads the committed state before a retry (a commit may or may not have
            happened: only what the tables say counts).
        retries: Retries after the first failure.
        stop: Set when the query is asked to stop.
        backoff: Seconds to wait after the n-th failure in a row.

    Returns:
        What ``attempt`` returned, or None if ``stop`` was set while waiting to retry (the failed
        batch is left to the next start, which resumes from the tables).

    Raises:
        IngestError: At once for an error a retry cannot fix (an :class:`IcestreamError` is raised
            as it is: its message already says what to do).
        Exception: The last transient error, once ``retries`` retries failed too.
    """
    failures = 0
    while True:
        try:
            if failures:
                recover()
            return attempt()
        except Exception as error:
            if not is_transient(error):
                if isinstance(error, IcestreamError):
                    raise
                raise IngestError(
                    f"The ingest stopped at once on {describe(error)}. This error is not transient, so it was "
                    "not retried (a bug, or a table or transform that does not fit the data). The tables are "
                    "consistent: fix the cause and start the ingest again; it resumes from what they committed."
                ) from error
            failures += 1
            if failures > retries:
                raise
            if stop.wait(backoff(failures)):
                return None
