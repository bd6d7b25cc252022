"""Which batch failures are retried, and that a stop ends the wait before a retry (no JVM)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.errors.exceptions.captured import PythonException

from icestream.errors import ConfigError, IngestError, InjectedFaultError, ShardReadError
from icestream.ingest.batch_retry import describe, is_transient, run_with_retries
from icestream.ingest.call_retry import is_transient_call


class FakeJavaThrowable:
    """What py4j hands over for a Java exception: toString() and getCause()."""

    _target_id = "o1"

    def __init__(self, text: str, cause: FakeJavaThrowable | None = None) -> None:
        self.text, self.cause = text, cause

    def toString(self) -> str:  # noqa: N802 - Java's name
        return self.text

    def getCause(self) -> FakeJavaThrowable | None:  # noqa: N802 - Java's name
        return self.cause


def java_error(*chain: str) -> Py4JJavaError:
    """A Py4JJavaError whose Java exception has the given causes, outermost first."""
    cause = None
    for text in reversed(chain):
        cause = FakeJavaThrowable(text, cause)
    return Py4JJavaError("An error occurred while calling o42.append.\n", cause)


def python_worker_error(traceback_tail: str) -> PythonException:
    """pyspark's PythonException as a failed read task raises it (built without a JVM)."""
    error = PythonException.__new__(PythonException)
    error.desc = (
        "\n  An exception was thrown from the Python worker. Please see the stack trace below.\n"
        'Traceback (most recent call last):\n  File "reader.py", line 170, in _backoff\n'
        f"    raise ShardReadError(\n{traceback_tail}\n"
    )
    error.stackTrace = "org.apache.spark.api.python.PythonException: ...\n\tat org.apache.spark..."
    return error


def client_error(code: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}},
                       "ListShards")  # fmt: skip


STAGE_FAILURE = "org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 7.0 failed"


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ShardReadError("shard shardId-000000000001: 8 failures in a row"), True),
        (InjectedFaultError("fault injected at between_commits of batch 1: SimulatedCrashError: crash"), True),
        (client_error("ProvisionedThroughputExceededException", 400), True),
        (client_error("ThrottlingException", 400), True),
        (client_error("InternalFailure", 500), True),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:4567/"), True),
        (ConnectionResetError(104, "Connection reset by peer"), True),
        (java_error(STAGE_FAILURE, "org.apache.iceberg.exceptions.CommitFailedException: Version 12 already exists"),
         True),
        (java_error("org.apache.iceberg.exceptions.ValidationException: Found conflicting files that can contain "
                    "records matching true: [a.parquet]"), True),
        (java_error(STAGE_FAILURE + ": org.apache.spark.api.python.PythonException: Traceback (most recent call "
                    "last):\nicestream.errors.ShardReadError: shard shardId-000000000000: 8 failures in a row"), True),
        (python_worker_error("icestream.errors.ShardReadError: shard shardId-000000000000: 8 failures in a row"),
         True),
        (python_worker_error("botocore.exceptions.EndpointConnectionError: Could not connect to the endpoint URL"),
         True),
        # Programming and user errors: the same every time.
        (TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'"), False),
        (KeyError("shard_id"), False),
        (AttributeError("'NoneType' object has no attribute 'summary'"), False),
        (ValueError("not a sequence number: 'x'"), False),
        (ConfigError("the ingest transform must keep the table's columns; it dropped device_info."), False),
        (AnalysisException(message="[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `coupon` cannot be resolved."),
         False),
        (client_error("ResourceNotFoundException", 400), False),
        (java_error("org.apache.iceberg.exceptions.ValidationException: Cannot find field 'coupon' in struct"), False),
        (java_error(STAGE_FAILURE, "java.lang.NullPointerException"), False),
        # A read task's bug: the traceback quotes `raise ShardReadError(` but the error is a TypeError.
        (python_worker_error("TypeError: '<' not supported between instances of 'str' and 'int'"), False),
    ],
)  # fmt: skip
def test_only_transient_failures_are_retried(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


def test_a_call_error_is_transient_by_code_status_or_connection() -> None:
    assert is_transient_call(client_error("KMSThrottlingException", 400))
    assert is_transient_call(client_error("SomethingNew", 503))
    assert is_transient_call(TimeoutError())
    assert not is_transient_call(client_error("InvalidArgumentException", 400))


def test_describe_names_the_worker_exception_not_the_traceback_header() -> None:
    error = python_worker_error("TypeError: '<' not supported between instances of 'str' and 'int'")
    assert describe(error) == "PythonException: TypeError: '<' not supported between instances of 'str' and 'int'"
    assert describe(KeyError("shard_id")) == "KeyError: 'shard_id'"


def test_describe_gives_the_root_cause_a_user_can_act_on() -> None:
    # A read-only table folder (issue 43, item 5): the first line names the operation, the last cause why.
    error = java_error(
        "org.apache.iceberg.exceptions.RuntimeIOException: Failed to create file: file:/w/t/metadata/6.metadata.json",
        "java.io.FileNotFoundException: /w/t/metadata/6.metadata.json (Operation not permitted)",
    )
    assert describe(error) == (
        "Py4JJavaError: org.apache.iceberg.exceptions.RuntimeIOException: Failed to create file: "
        "file:/w/t/metadata/6.metadata.json (caused by java.io.FileNotFoundException: "
        "/w/t/metadata/6.metadata.json (Operation not permitted))"
    )
    assert describe(java_error(STAGE_FAILURE)) == f"Py4JJavaError: {STAGE_FAILURE}"  # no cause: the line alone


class Attempts:
    """A batch that raises the queued errors, then returns 'done'."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.recovered = 0
        self.failed = threading.Event()

    def attempt(self) -> str:
        self.calls += 1
        if self.errors:
            self.failed.set()
            raise self.errors.pop(0)
        return "done"

    def recover(self) -> None:
        self.recovered += 1


def test_transient_failures_are_retried_after_recovering() -> None:
    batch = Attempts(ShardReadError("s"), client_error("ThrottlingException", 400))
    waits: list[int] = []
    result = run_with_retries(batch.attempt, batch.recover, 3, threading.Event(), lambda n: waits.append(n) or 0.0)
    assert result == "done"
    assert (batch.calls, batch.recovered, waits) == (3, 2, [1, 2])


def test_the_last_transient_failure_is_raised_when_retries_run_out() -> None:
    batch = Attempts(*(ShardReadError(f"failure {n}") for n in range(3)))
    with pytest.raises(ShardReadError, match="failure 2"):
        run_with_retries(batch.attempt, batch.recover, 2, threading.Event(), lambda n: 0.0)
    assert batch.calls == 3


def test_a_programming_error_stops_at_once_with_ingest_error() -> None:
    batch = Attempts(KeyError("shard_id"))
    with pytest.raises(IngestError, match=r"KeyError: 'shard_id'.*not retried") as raised:
        run_with_retries(batch.attempt, batch.recover, 3, threading.Event(), lambda n: 0.0)
    assert isinstance(raised.value.__cause__, KeyError)
    assert (batch.calls, batch.recovered) == (1, 0)


def test_a_user_error_keeps_its_own_message() -> None:
    batch = Attempts(ConfigError("the ingest transform must keep the table's columns"))
    with pytest.raises(ConfigError, match="transform"):
        run_with_retries(batch.attempt, batch.recover, 3, threading.Event(), lambda n: 0.0)
    assert batch.calls == 1


def test_stop_ends_the_wait_before_a_retry() -> None:
    batch = Attempts(ShardReadError("shard shardId-000000000000: 8 failures in a row"))
    stop = threading.Event()
    outcome: list[Any] = []
    worker = threading.Thread(
        target=lambda: outcome.append(run_with_retries(batch.attempt, batch.recover, 3, stop, lambda n: 3600.0))
    )
    worker.start()
    assert batch.failed.wait(60)
    stop.set()
    worker.join(60)  # an hour-long wait that ignored the stop would still be running
    assert not worker.is_alive()
    assert outcome == [None], "a stop during the wait ends the query without retrying"
    assert (batch.calls, batch.recovered) == (1, 0)
