"""Send records to Kinesis with PutRecords: batched within the limits, retried per record, reported.

- Batches hold at most 500 records and 5 MiB; a record above 1 MiB (data plus partition key) can
  never be sent, so it is reported as *unsendable* and skipped.
- The partition key is the record's (the user id), so each user's events stay in one shard, in order.
  A retried record may land after a newer record of the same user, as with any retrying producer.
- PutRecords can fail some records of a call (throttling, internal errors): only those are sent again,
  with exponential backoff and jitter, for a bounded number of attempts; what still fails is
  reported in the summary with its error code. Nothing is dropped without being counted.
- Optional pacing: a rate limit in records/s, or sending each record when its ``send_at`` time comes
  (live mode, so event time is about now when the record arrives).
- One PutRecords call is in flight at a time, on a sender thread, while the next batch is built: the
  calls stay in order (so each user's records do), and taking records from a generator (which costs
  CPU) overlaps the wait for Kinesis instead of adding to it.
"""

from __future__ import annotations

import queue
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from icestream.config import Settings
from icestream.errors import ServiceUnavailableError
from icestream.limits import (
    MAX_BYTES_PER_PUT,
    MAX_PARTITION_KEY_CHARS,
    MAX_RECORD_BYTES,
    MAX_RECORDS_PER_PUT,
    THROTTLED,
)
from icestream.producer.send_loop import SendLoop
from icestream.producer.summary import FailedRecord, ProduceSummary
from icestream.synthetic.wire import Record

# Errors that no retry can fix: the stream is missing or the request is wrong.
_FATAL_CODES = frozenset(
    {
        "ResourceNotFoundException",
        "ValidationException",
        "AccessDeniedException",
        "InvalidArgumentException",
        "KMSAccessDeniedException",
        "KMSNotFoundException",
        "KMSDisabledException",
        "UnrecognizedClientException",
    }
)


@dataclass(frozen=True)
class RetryPolicy:
    """How failed records are retried.

    A throttled record (the shard's write limit, ``ProvisionedThroughputExceededException``) is
    not failing: it waits its turn. Calls whose failures were all throttles do not count towards
    ``max_attempts``; they go on, with the same backoff, until ``throttle_patience`` seconds of
    backoff have passed.

    Attributes:
        max_attempts: Calls per record at most (the first one included) that fail other than throttled.
        base_delay: Backoff before the second attempt, in seconds; it doubles per attempt.
        max_delay: Upper bound of one backoff, in seconds.
        throttle_patience: Seconds of backoff a batch waits for throttled records at most.
    """

    max_attempts: int = 6
    base_delay: float = 0.1
    max_delay: float = 5.0
    throttle_patience: float = 120.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Backoff after failed attempt ``attempt`` (1-based): half fixed, half random ("equal jitter")."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return ceiling / 2 + rng.uniform(0, ceiling / 2)


def unsendable(record: Record, size: int) -> tuple[str, str] | None:
    """Why Kinesis would refuse ``record`` whatever the retries (error code, message), or None.

    The producer checks this itself, for every record, so its client can skip botocore's own
    per-request validation (see :func:`producer_client`).
    """
    if size > MAX_RECORD_BYTES:
        return "RecordTooLarge", f"{size} bytes is above the Kinesis record limit of {MAX_RECORD_BYTES} bytes"
    if not 1 <= len(record.partition_key) <= MAX_PARTITION_KEY_CHARS:
        return (
            "InvalidPartitionKey",
            f"a partition key has 1 to {MAX_PARTITION_KEY_CHARS} characters, not {len(record.partition_key)}",
        )
    return None


def producer_client(settings: Settings) -> Any:
    """A Kinesis client for sending: botocore's request validation off, as the producer checks its own.

    Records per call and bytes per call (:class:`BatchBuilder`), record size and partition key
    (:func:`unsendable`) are checked once per record here; botocore would check every field of every
    record again on each call, about a quarter of the client's time per record.
    """
    from icestream.kinesis.clients import kinesis_client

    return kinesis_client(settings, validate=False)


def record_size(record: Record) -> int:
    """Bytes a record counts against the Kinesis limits: data plus partition key."""
    return record.size


class BatchBuilder:
    """Collects records into one PutRecords batch while it stays within the per-call limits.

    Args:
        max_records: Records per batch at most.
        max_bytes: Bytes per batch at most (data plus partition keys).
    """

    def __init__(self, max_records: int = MAX_RECORDS_PER_PUT, max_bytes: int = MAX_BYTES_PER_PUT) -> None:
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.records: list[Record] = []
        self.bytes = 0

    def fits(self, size: int) -> bool:
        """True if a record of ``size`` bytes can join the batch (an empty batch takes any record)."""
        return not self.records or (len(self.records) < self.max_records and self.bytes + size <= self.max_bytes)

    def add(self, record: Record, size: int) -> None:
        """Add a record (check :meth:`fits` first)."""
        self.records.append(record)
        self.bytes += size

    def take(self) -> list[Record]:
        """Return the batch and start a new one."""
        batch, self.records, self.bytes = self.records, [], 0
        return batch


def batches(
    records: Iterable[Record],
    max_records: int = MAX_RECORDS_PER_PUT,
    max_bytes: int = MAX_BYTES_PER_PUT,
    max_record_bytes: int = MAX_RECORD_BYTES,
) -> Iterator[list[Record] | Record]:
    """Group records into PutRecords batches within the limits, keeping their order.

    Args:
        records: The records.
        max_records: Records per batch at most.
        max_bytes: Bytes per batch at most (data plus partition keys).
        max_record_bytes: Bytes per record at most.

    Yields:
        A list for each batch, or a single :class:`Record` that is above ``max_record_bytes`` and
        so can never be sent (the caller reports it).
    """
    builder = BatchBuilder(max_records, max_bytes)
    for record in records:
        size = record_size(record)
        if size > max_record_bytes:
            yield record
            continue
        if not builder.fits(size):
            yield builder.take()
        builder.add(record, size)
    if builder.records:
        yield builder.take()


class Producer(SendLoop):
    """A PutRecords sender for one stream.

    Args:
        client: A boto3 Kinesis client (or anything with ``put_records``, e.g. a fault-injecting fake).
        stream_name: The stream.
        retry: How failed records are retried.
        seed: Seeds the backoff jitter (None: random).
        sleep: Waits that many seconds, or less when a stop is requested (for tests: a fake clock).
    """

    def __init__(
        self,
        client: Any,
        stream_name: str,
        retry: RetryPolicy | None = None,
        seed: int | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(stream_name, sleep)
        self.client = client
        self.stream_name = stream_name
        self.retry = retry or RetryPolicy()
        self._rng = random.Random(seed)  # noqa: S311 - jitter, not security

    def _outlet(self, summary: ProduceSummary, bar: Any) -> _Sender:
        return _Sender(self, summary, bar)

    def _call(self, batch: list[Record], summary: ProduceSummary) -> list[tuple[Record, str, str]]:
        """One PutRecords call; return the records that failed, with error code and message."""
        from botocore.exceptions import BotoCoreError, ClientError

        summary.calls += 1
        entries = [{"Data": record.data, "PartitionKey": record.partition_key} for record in batch]
        try:
            response = self.client.put_records(StreamName=self.stream_name, Records=entries)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "ClientError")
            message = error.response.get("Error", {}).get("Message", str(error))
            if code in _FATAL_CODES:
                hint = (
                    " Create it with `icestream setup` or ensure_stream()."
                    if code == "ResourceNotFoundException"
                    else ""
                )
                raise ServiceUnavailableError(
                    f"PutRecords to {self.stream_name} failed: {code}: {message}.{hint}"
                ) from None
            return [(record, code, message) for record in batch]
        except BotoCoreError as error:
            # Connection trouble: the whole call failed; it is retried like a throttled call.
            return [(record, type(error).__name__, str(error)) for record in batch]
        failed = []
        if response.get("FailedRecordCount") == 0:  # the usual answer: no need to look at each result
            accepted = batch
        else:
            accepted = []
            for record, result in zip(batch, response["Records"], strict=True):
                if result.get("ErrorCode"):
                    failed.append((record, result["ErrorCode"], result.get("ErrorMessage", "")))
                else:
                    accepted.append(record)
        summary.sent += len(accepted)
        summary.bytes_sent += sum(record.size for record in accepted)
        for kind, count in Counter(record.kind for record in accepted).items():
            summary.sent_by_kind[kind] = summary.sent_by_kind.get(kind, 0) + count
        return failed

    def put(self, batch: list[Record], summary: ProduceSummary) -> None:
        """Send one batch; retry only the failed records with backoff; report those that never succeed.

        Raises:
            ServiceUnavailableError: If the stream does not exist or the request is refused outright, or
                no record of the batch got through because the endpoint cannot be reached.
        """
        pending, calls, failing_calls, waited = batch, 0, 0, 0.0
        while True:
            calls += 1
            failed = self._call(pending, summary)
            if not failed:
                return
            throttled = sum(code == THROTTLED for _, code, _ in failed)
            summary.throttled += throttled
            failing_calls += throttled < len(failed)
            if failing_calls >= self.retry.max_attempts or waited >= self.retry.throttle_patience:
                break
            summary.retried += len(failed)
            pause = self.retry.delay(calls, self._rng)
            waited += pause
            self._sleep(pause)
            pending = [record for record, _, _ in failed]
        for record, code, message in failed:
            summary.failed += 1
            summary.failures.append(
                FailedRecord(record.kind, record.partition_key, record.event_id, record_size(record), code, message)
            )
        unreachable = ("EndpointConnectionError", "ConnectionClosedError", "ConnectTimeoutError", "ReadTimeoutError")
        if len(failed) == len(batch) and failed[0][1] in unreachable:
            raise ServiceUnavailableError(
                f"Kinesis could not be reached after {self.retry.max_attempts} attempts ({failed[0][1]}: "
                f"{failed[0][2]}); {summary.sent} records were sent before. Check the endpoint "
                "(`icestream emulator status` for the local profile)."
            )


class _Sender:
    """One send's outlet: records batched within the limits, the batches sent in order on a background thread.

    The next batch is built during a call. At most one batch waits while one is in flight (``add``
    blocks beyond that), so memory stays bounded and a slow stream slows the producer down instead of
    piling records up.

    Args:
        producer: Makes the calls (:meth:`Producer.put`).
        summary: Where the calls' results are counted (only this thread writes those fields).
        bar: The progress bar to advance.
    """

    def __init__(self, producer: Producer, summary: ProduceSummary, bar: Any) -> None:
        self._producer, self._summary, self._bar = producer, summary, bar
        self._builder = BatchBuilder()
        self._batches: queue.Queue[list[Record] | None] = queue.Queue(maxsize=1)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"put→{producer.stream_name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (batch := self._batches.get()) is not None:
            if self._error is not None:
                continue  # after a fatal error nothing more is sent; the caller raises it
            before = self._summary.sent + self._summary.failed
            try:
                self._producer.put(batch, self._summary)
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread, raised there
                self._error = error
            self._bar.update(self._summary.sent + self._summary.failed - before)

    def add(self, record: Record, size: int) -> tuple[str, str] | None:
        """Batch a record (a full batch goes to the thread first), or say why Kinesis would refuse it."""
        problem = unsendable(record, size)
        if problem:
            return problem
        if not self._builder.fits(size):
            self.flush()
        self._builder.add(record, size)
        return None

    def flush(self) -> None:
        """Queue the batch built so far (waits while one is queued and one in flight); raise an error met."""
        if self._builder.records:
            self.raise_error()
            self._batches.put(self._builder.take())

    def close(self) -> None:
        """Send what is queued and end the thread."""
        self._batches.put(None)
        self._thread.join()

    def raise_error(self) -> None:
        """Raise the error that ended sending, if one did (e.g. :class:`ServiceUnavailableError`)."""
        if self._error is not None:
            raise self._error


def produce(
    settings: Settings,
    records: Iterable[Record],
    *,
    client: Any | None = None,
    retry: RetryPolicy | None = None,
    **options: Any,
) -> ProduceSummary:
    """Send records to the stream named by ``settings``.

    Args:
        settings: Names the stream and the endpoint.
        records: The records, in send order.
        client: A Kinesis client (default: one for the active profile).
        retry: How failed records are retried.
        **options: Passed to :meth:`SendLoop.send` (rate_limit, pace, duration, total, progress).

    Returns:
        The summary.
    """
    producer = Producer(client or producer_client(settings), settings.stream_name, retry=retry)
    return producer.send(records, **options)
