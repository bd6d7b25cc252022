"""The loop every sender runs: records taken in order, paced, stopped, counted, and handed to an outlet.

A sender (:class:`icestream.producer.put.Producer` for Kinesis, :class:`icestream.producer.kafka_send.KafkaSender`
for Kafka) is a :class:`SendLoop` with an :class:`Outlet` of its own: the loop decides *when* a record
goes (``rate_limit``, ``pace`` by ``send_at``, ``duration``, a stop request) and keeps the count that
:class:`~icestream.producer.summary.ProduceSummary` promises (``records == sent + failed +
unsendable + unsent``); the outlet decides *how*: Kinesis batches within the PutRecords limits and
calls from a thread, Kafka hands each record to librdkafka and counts its delivery reports.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from icestream.errors import ConfigError
from icestream.limits import MAX_RECORDS_PER_PUT
from icestream.producer.progress import progress_bar
from icestream.producer.summary import FailedRecord, ProduceSummary
from icestream.synthetic.wire import Record


class Outlet(Protocol):
    """Where one :meth:`SendLoop.send` hands its records; it counts ``sent`` and ``failed`` in the summary."""

    def add(self, record: Record, size: int) -> tuple[str, str] | None:
        """Take a record to send; or, when no retry could ever send it, return why (error code, message)."""

    def flush(self) -> None:
        """Send what is held back (the loop is about to wait for the next record's time)."""

    def close(self) -> None:
        """Send everything taken and wait for the answers (always called, also after an error)."""

    def raise_error(self) -> None:
        """Raise the error that ended sending, if one did (e.g. :class:`ServiceUnavailableError`)."""


class SendLoop(ABC):
    """What every sender shares: :meth:`send`, :meth:`stop`, and waits that a stop request cuts short.

    Args:
        destination: What the records go to (a stream, a topic), for the progress bar.
        sleep: Waits that many seconds, or less when a stop is requested (for tests: a fake clock).
    """

    #: A wait for due records ends once about this many have fallen due (the outlet's natural batch).
    batch_records = MAX_RECORDS_PER_PUT

    def __init__(self, destination: str, sleep: Callable[[float], None] | None = None) -> None:
        self.destination = destination
        self._stop = threading.Event()
        self._sleep = sleep or self._wait

    def _wait(self, seconds: float) -> None:
        self._stop.wait(max(0.0, seconds))  # a stop request ends the wait at once

    def stop(self) -> None:
        """Ask a running :meth:`send` to finish: it sends what it has taken and returns."""
        self._stop.set()

    def _check(self) -> None:
        """Refuse to start when the destination cannot take records (missing, unreachable); default: no check.

        Called before the first record is taken or the progress bar is drawn, so a refusal is the only line.
        """
        return None  # Kinesis: PutRecords itself says a stream is missing (Producer.put raises at once)

    @abstractmethod
    def _outlet(self, summary: ProduceSummary, bar: Any) -> Outlet:
        """A new outlet for one :meth:`send`, counting into ``summary`` and advancing ``bar``."""

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
        """Send records until the input ends, ``duration`` passes or :meth:`stop` is called.

        Args:
            records: The records, in send order.
            rate_limit: At most this many records per second (None: as fast as the destination takes them).
            pace: Send each record at its ``send_at`` wall time (live mode).
            duration: Stop after this many seconds (records not yet taken are not generated).
            total: Expected record count, for the progress bar.
            progress: Show progress: a bar on a terminal, one line at the end elsewhere.
            linger: When waiting for due records, wake at most this often, so batches are not tiny.

        Returns:
            The summary.

        Raises:
            ConfigError: If ``rate_limit`` or ``duration`` is not positive.
            ServiceUnavailableError: If the destination is missing or cannot be reached (see the outlet).
        """
        if rate_limit is not None and not rate_limit > 0:
            raise ConfigError(f"rate limit: {rate_limit} must be a positive number of records per second.")
        if duration is not None and not duration > 0:
            raise ConfigError(f"duration: {duration} must be a positive number of seconds.")
        self._check()
        summary = ProduceSummary()
        started = time.monotonic()
        wall_offset = time.time() - started  # monotonic → wall clock, for pacing by send_at
        deadline = started + duration if duration else None
        bar = progress_bar(total, f"→ {self.destination}", enabled=progress)
        outlet = self._outlet(summary, bar)
        try:
            woke, first_due = started, None
            for index, record in enumerate(records):
                summary.records += 1
                due = record.send_at - wall_offset if pace else started + index / rate_limit if rate_limit else None
                if due is not None and due > time.monotonic():
                    outlet.flush()
                    first_due = due if first_due is None else first_due
                    # Wake when a full batch has fallen due at the pace so far, but at most every ``linger``
                    # (a slow stream still sends), counted from the last wake, not from now: handing a
                    # backlog to a busy sender takes time, and waiting after that would idle the sender.
                    full_batch = (due - first_due) / max(1, index) * self.batch_records
                    wake = max(due, woke + min(linger, full_batch))
                    self._sleep(min(wake, deadline or wake) - time.monotonic())
                    woke = time.monotonic()
                if self._stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
                    summary.stopped_early = True
                    summary.unsent += 1  # taken, its time not come: counted, not sent
                    break
                size = record.size
                problem = outlet.add(record, size)
                if problem:
                    summary.unsendable += 1
                    summary.failures.append(
                        FailedRecord(record.kind, record.partition_key, record.event_id, size, *problem)
                    )
                    bar.update(1)
            outlet.flush()
        finally:
            outlet.close()
            bar.close()
            summary.seconds = time.monotonic() - started
        outlet.raise_error()
        return summary
