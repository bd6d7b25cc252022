"""Send records to Kinesis with PutRecords: batched within the limits, retried per record, reported.

- Batches hold at most 500 records and 5 MiB; a record above 1 MiB (data plus partition key) can
  never be sent, so it is reported as *unsendable* and skipped.
- The partition key is the record's (the user id), so each user's events stay in one shard, in order.
  A retried record may land after a newer record of the same user, as with any retrying producer.
- PutRecords can fail some records of a call (throttling, internal errors): only those are sent again,
  with exponential backoff and jitter, for a bounded number of attempts; what still fails is
  reported in the summary with its error code. Nothing is dropped without being counted.
- Optional pacing: a rate limit in events/s, or sending each record when its ``send_at`` time comes
  (live mode, so event time is about now when the record arrives).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from tqdm import tqdm

from icestream.config import Settings
from icestream.errors import ConfigError, ServiceUnavailableError
from icestream.limits import MAX_BYTES_PER_PUT, MAX_RECORD_BYTES, MAX_RECORDS_PER_PUT
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

    Attributes:
        max_attempts: Calls per record at most (the first one included).
        base_delay: Backoff before the second attempt, in seconds; it doubles per attempt.
        max_delay: Upper bound of one backoff, in seconds.
    """

    max_attempts: int = 6
    base_delay: float = 0.1
    max_delay: float = 5.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Backoff after failed attempt ``attempt`` (1-based): half fixed, half random ("equal jitter")."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return ceiling / 2 + rng.uniform(0, ceiling / 2)


@dataclass(frozen=True)
class FailedRecord:
    """A record that was not sent, and why."""

    kind: str
    partition_key: str
    event_id: str | None
    size: int
    error_code: str
    error_message: str


@dataclass
class ProduceSummary:
    """What a run of the producer did.

    Attributes:
        records: Records taken from the input.
        sent: Records Kinesis accepted.
        retried: Record sends repeated after a failure (one record retried twice counts 2).
        failed: Records still failing after the last attempt (see ``failures``).
        unsendable: Records above the 1 MiB record limit, never sent (see ``failures``).
        bytes_sent: Payload plus partition-key bytes accepted.
        calls: PutRecords calls made.
        seconds: Wall time.
        stopped_early: True when a duration or a stop request ended the run before the input did.
        sent_by_kind: Records accepted, by record kind.
        failures: Every failed and unsendable record.
    """

    records: int = 0
    sent: int = 0
    retried: int = 0
    failed: int = 0
    unsendable: int = 0
    bytes_sent: int = 0
    calls: int = 0
    seconds: float = 0.0
    stopped_early: bool = False
    sent_by_kind: dict[str, int] = field(default_factory=dict)
    failures: list[FailedRecord] = field(default_factory=list)

    @property
    def events_per_second(self) -> float:
        """Records accepted per second of wall time."""
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready values (failures listed at most 100, with the full count kept)."""
        values = asdict(self)
        values["events_per_second"] = round(self.events_per_second, 1)
        values["seconds"] = round(self.seconds, 3)
        values["failures"] = values["failures"][:100]
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> ProduceSummary:
        """Read back what :meth:`as_dict` wrote (the failures as far as it listed them)."""
        names = {item.name for item in fields(cls)} - {"failures"}
        failures = [FailedRecord(**failure) for failure in values.get("failures", [])]
        return cls(**{name: values[name] for name in names if name in values}, failures=failures)

    def table(self) -> dict[str, float | int]:
        """The headline numbers (for a one-row table)."""
        return {
            "records": self.records,
            "sent": self.sent,
            "retried": self.retried,
            "failed": self.failed,
            "unsendable": self.unsendable,
            "MiB": round(self.bytes_sent / 2**20, 2),
            "calls": self.calls,
            "seconds": round(self.seconds, 1),
            "events/s": round(self.events_per_second, 1),
        }


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


class Producer:
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
        self.client = client
        self.stream_name = stream_name
        self.retry = retry or RetryPolicy()
        self._rng = random.Random(seed)  # noqa: S311 - jitter, not security
        self._stop = threading.Event()
        self._sleep = sleep or self._wait

    def _wait(self, seconds: float) -> None:
        self._stop.wait(max(0.0, seconds))  # a stop request ends the wait at once

    def stop(self) -> None:
        """Ask a running :meth:`send` to finish: it sends what it has batched and returns."""
        self._stop.set()

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
        for record, result in zip(batch, response["Records"], strict=True):
            if result.get("ErrorCode"):
                failed.append((record, result["ErrorCode"], result.get("ErrorMessage", "")))
            else:
                summary.sent += 1
                summary.bytes_sent += record_size(record)
                summary.sent_by_kind[record.kind] = summary.sent_by_kind.get(record.kind, 0) + 1
        return failed

    def put(self, batch: list[Record], summary: ProduceSummary) -> None:
        """Send one batch; retry only the failed records with backoff; report those that never succeed.

        Raises:
            ServiceUnavailableError: If the stream does not exist or the request is refused outright, or
                no record of the batch got through because the endpoint cannot be reached.
        """
        pending = batch
        for attempt in range(1, self.retry.max_attempts + 1):
            failed = self._call(pending, summary)
            if not failed:
                return
            if attempt == self.retry.max_attempts:
                break
            summary.retried += len(failed)
            self._sleep(self.retry.delay(attempt, self._rng))
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

    def send(
        self,
        records: Iterable[Record],
        *,
        rate_limit: float | None = None,
        pace: bool = False,
        duration: float | None = None,
        total: int | None = None,
        progress: bool = True,
        linger: float = 0.2,
    ) -> ProduceSummary:
        """Send records, in batches, until the input ends, ``duration`` passes or :meth:`stop` is called.

        Args:
            records: The records, in send order.
            rate_limit: At most this many records per second (None: as fast as Kinesis takes them).
            pace: Send each record at its ``send_at`` wall time (live mode).
            duration: Stop after this many seconds (records not yet taken are not generated).
            total: Expected record count, for the progress bar.
            progress: Show a tqdm progress bar.
            linger: When waiting for due records, wait at least this long, so batches are not tiny.

        Returns:
            The summary.

        Raises:
            ConfigError: If ``rate_limit`` or ``duration`` is not positive.
            ServiceUnavailableError: See :meth:`put`.
        """
        if rate_limit is not None and not rate_limit > 0:
            raise ConfigError(f"rate limit: {rate_limit} must be a positive number of events per second.")
        if duration is not None and not duration > 0:
            raise ConfigError(f"duration: {duration} must be a positive number of seconds.")
        summary = ProduceSummary()
        started = time.monotonic()
        wall_offset = time.time() - started  # monotonic → wall clock, for pacing by send_at
        deadline = started + duration if duration else None
        builder = BatchBuilder()
        bar = tqdm(total=total, disable=not progress, unit="ev", mininterval=0.5, desc=f"→ {self.stream_name}")

        def flush() -> None:
            if builder.records:
                before = summary.sent + summary.failed
                self.put(builder.take(), summary)
                bar.update(summary.sent + summary.failed - before)

        try:
            for index, record in enumerate(records):
                now = time.monotonic()
                due = None
                if pace:
                    due = record.send_at - wall_offset
                elif rate_limit:
                    due = started + index / rate_limit
                if due is not None and due > now:
                    flush()
                    wake = max(due, time.monotonic() + linger)
                    if deadline is not None and wake >= deadline:
                        self._sleep(deadline - time.monotonic())
                        summary.stopped_early = True
                        break
                    self._sleep(wake - time.monotonic())
                if self._stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
                    summary.stopped_early = True
                    break
                summary.records += 1
                size = record_size(record)
                if size > MAX_RECORD_BYTES:
                    summary.unsendable += 1
                    summary.failures.append(
                        FailedRecord(
                            record.kind,
                            record.partition_key,
                            record.event_id,
                            size,
                            "RecordTooLarge",
                            f"{size} bytes is above the Kinesis record limit of {MAX_RECORD_BYTES} bytes",
                        )
                    )
                    bar.update(1)
                    continue
                if not builder.fits(size):
                    flush()
                builder.add(record, size)
            flush()
        finally:
            bar.close()
            summary.seconds = time.monotonic() - started
        return summary


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
        **options: Passed to :meth:`Producer.send` (rate_limit, pace, duration, total, progress).

    Returns:
        The summary.
    """
    from icestream.clients import kinesis_client

    producer = Producer(client or kinesis_client(settings), settings.stream_name, retry=retry)
    return producer.send(records, **options)
