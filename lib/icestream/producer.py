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
- A background producer runs the CLI in its own process for a bounded duration, with a state file
  under ``run_dir`` (like the emulator), so a notebook can start it and the next one can read a live
  stream.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from icestream.config import Settings
from icestream.emulator import process_alive, process_start_time
from icestream.errors import ConfigError, ServiceUnavailableError
from icestream.events import EventGenerator, Record, ground_truth_path, write_ground_truth
from icestream.limits import MAX_BYTES_PER_PUT, MAX_RECORD_BYTES, MAX_RECORDS_PER_PUT

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
STATE_FILE = "producer.json"
LOG_FILE = "producer.log"
LIVE_SUMMARY_FILE = "producer_live_summary.json"
MAX_BACKGROUND_SECONDS = 6 * 3600.0  # background production is always bounded


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
    return len(record.data) + len(record.partition_key.encode())


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


# -- background production ----------------------------------------------------------------------
@dataclass(frozen=True)
class BackgroundProducerStatus:
    """The background producer as seen now.

    Attributes:
        running: Its process is alive.
        pid: Its process id (None if none was started).
        started_at: Wall-clock start (epoch seconds).
        ends_by: When it stops at the latest (epoch seconds).
        log: Its log file.
        summary_file: Where it writes its summary when it ends.
        summary: That summary, once written.
        detail: One line for people.
    """

    running: bool
    pid: int | None
    started_at: float | None
    ends_by: float | None
    log: str | None
    summary_file: str
    summary: dict[str, Any] | None
    detail: str


def _state_path(settings: Settings) -> Path:
    return settings.path("run_dir") / STATE_FILE


def _read_state(settings: Settings) -> dict[str, Any] | None:
    try:
        return json.loads(_state_path(settings).read_text())
    except (OSError, ValueError):
        return None


def _owns(state: dict[str, Any]) -> bool:
    """True when the state's pid is still the producer process this module started."""
    pid = int(state.get("pid", 0))
    if pid <= 0 or not process_alive(pid) or _is_zombie(pid):
        return False
    current = process_start_time(pid)
    if current and current != state.get("process_start"):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return True
    return "icestream.cli" in command and "produce" in command


def live_summary_path(settings: Settings) -> Path:
    """Where the background producer writes its summary: ``<run_dir>/producer_live_summary.json``."""
    return settings.path("run_dir") / LIVE_SUMMARY_FILE


def _settings_environment(settings: Settings) -> dict[str, str]:
    """The settings the child needs, as ICESTREAM_* variables (arguments given to load_settings are not in
    the environment otherwise)."""
    values = {
        "ICESTREAM_PROFILE": settings.profile,
        "ICESTREAM_REGION": settings.region,
        "ICESTREAM_STREAM_NAME": settings.stream_name,
        "ICESTREAM_RUN_DIR": str(settings.path("run_dir")),
    }
    if settings.kinesis_endpoint:
        values["ICESTREAM_KINESIS_ENDPOINT"] = settings.kinesis_endpoint
    return values


def start_background_producer(
    settings: Settings,
    *,
    rate: float = 100.0,
    duration: float = 300.0,
    seed: int | None = None,
    bad_rate: float = 0.005,
    duplicate_rate: float = 0.01,
    late_rate: float = 0.02,
    anomalies: str = "none",
    replace: bool = True,
) -> BackgroundProducerStatus:
    """Start live production in its own process, for ``duration`` seconds at most.

    The process outlives the notebook kernel that starts it (so the next notebook reads a live
    stream); it writes its summary to :func:`live_summary_path` when it ends, and the ground truth of
    any anomalies to :func:`icestream.events.ground_truth_path` (appended).

    Args:
        settings: Names the stream, endpoint and run folder.
        rate: Events per second.
        duration: Seconds to run (at most six hours).
        seed: Generator seed (None: a random one, so each run has new event ids).
        bad_rate: Malformed records per event.
        duplicate_rate: Share of events sent twice.
        late_rate: Share of events sent late.
        anomalies: Anomalies to inject (see :func:`icestream.events.parse_anomalies`), default none.
        replace: Stop a background producer that already runs first; else raise if one runs.

    Returns:
        Its status just after the start.

    Raises:
        ConfigError: If a value is out of range, or one already runs and ``replace`` is False.
    """
    if not 0 < duration <= MAX_BACKGROUND_SECONDS:
        raise ConfigError(
            f"duration: {duration} s; background production needs 0 < duration ≤ {MAX_BACKGROUND_SECONDS:.0f} s."
        )
    if not rate > 0:
        raise ConfigError(f"rate: {rate} must be a positive number of events per second.")
    from icestream.events import parse_anomalies

    parse_anomalies(anomalies)  # fail here, not in the child's log
    current = background_producer_status(settings)
    if current.running:
        if not replace:
            raise ConfigError(
                f"A background producer already runs (pid {current.pid}); stop it with `icestream produce --stop`."
            )
        stop_background_producer(settings)
    run_dir = settings.path("run_dir")
    run_dir.mkdir(parents=True, exist_ok=True)
    summary_file = live_summary_path(settings)
    summary_file.unlink(missing_ok=True)
    log_path = run_dir / LOG_FILE
    command = [
        sys.executable, "-m", "icestream.cli", "produce",
        "--rate", str(rate), "--duration", str(duration),
        "--bad-rate", str(bad_rate), "--duplicate-rate", str(duplicate_rate), "--late-rate", str(late_rate),
        "--anomalies", anomalies, "--summary-file", str(summary_file), "--no-progress",
    ]  # fmt: skip
    if seed is not None:
        command += ["--seed", str(seed)]
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **_settings_environment(settings)},
            start_new_session=True,  # not ended with the kernel that started it
        )
    started = time.time()
    state = {
        "pid": process.pid,
        "process_start": process_start_time(process.pid),
        "started_at": started,
        "ends_by": started + duration,
        "log": str(log_path),
        "summary_file": str(summary_file),
        "command": command,
    }
    _state_path(settings).write_text(json.dumps(state, indent=2))
    return background_producer_status(settings)


def background_producer_status(settings: Settings) -> BackgroundProducerStatus:
    """Report whether the background producer runs, and its summary once it has ended."""
    summary_file = live_summary_path(settings)
    try:
        summary = json.loads(summary_file.read_text())
    except (OSError, ValueError):
        summary = None
    state = _read_state(settings)
    if state is None:
        return BackgroundProducerStatus(False, None, None, None, None, str(summary_file), summary, "not started")
    _reap(int(state["pid"]))
    running = _owns(state)
    if running:
        detail = f"running, ends within {max(0.0, state['ends_by'] - time.time()):.0f} s"
    else:
        detail = "finished" if summary else f"not running, no summary; see {state['log']}"
    return BackgroundProducerStatus(
        running,
        int(state["pid"]),
        state["started_at"],
        state["ends_by"],
        state["log"],
        str(summary_file),
        summary,
        detail,
    )


def stop_background_producer(settings: Settings, timeout: float = 15.0) -> bool:
    """Stop the background producer this module started, if it runs; it writes its summary first.

    Args:
        settings: Names the run folder.
        timeout: Seconds to wait after SIGTERM before SIGKILL.

    Returns:
        True if a process was stopped.
    """
    state = _read_state(settings)
    if state is None or not _owns(state):
        return False
    pid = int(state["pid"])
    os.killpg(pid, signal.SIGTERM)  # the CLI handles it: finish the batch, write the summary
    deadline = time.monotonic() + timeout
    while process_alive(pid) and not _is_zombie(pid) and not _reap(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if process_alive(pid) and not _is_zombie(pid) and not _reap(pid):
        os.killpg(pid, signal.SIGKILL)
        _reap(pid)
    return True


def wait_background_producer(settings: Settings, timeout: float) -> BackgroundProducerStatus:
    """Wait up to ``timeout`` seconds for the background producer to end; return its status."""
    deadline = time.monotonic() + timeout
    status = background_producer_status(settings)
    while status.running and time.monotonic() < deadline:
        time.sleep(0.2)
        status = background_producer_status(settings)
    return status


def _is_zombie(pid: int) -> bool:
    """True for a process that has ended but not been collected by its parent (another kernel)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _reap(pid: int) -> bool:
    """Collect the exit status when the producer is our own child (no zombie); True if it has ended."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid


# -- one production run, as the CLI and the background process do it ---------------------------
def run_production(
    settings: Settings,
    records: Iterable[Record],
    *,
    mode: str,
    generator: EventGenerator | None = None,
    append_truth: bool = False,
    summary_file: Path | None = None,
    stop_on_sigterm: bool = False,
    client: Any | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Send records, write the anomaly ground truth and a JSON summary, and return that summary.

    Args:
        settings: Names the stream, endpoint and run folder.
        records: What to send (usually ``generator`` itself).
        mode: ``backfill``, ``live`` or ``file``, recorded in the summary.
        generator: The generator behind ``records``, for its ground truth and counts.
        append_truth: Add to the ground-truth file instead of replacing it (live after a backfill).
        summary_file: Where to write the summary (JSON); None writes none.
        stop_on_sigterm: Finish the current batch and write the summary on SIGTERM (main thread only).
        client: A Kinesis client (default: one for the active profile).
        **options: Passed to :meth:`Producer.send`.

    Returns:
        ``mode``, ``stream``, the generator's window, seed and counts, ``ground_truth`` (path),
        and ``producer`` (:meth:`ProduceSummary.as_dict`).
    """
    from icestream.clients import kinesis_client

    truth_path = ground_truth_path(settings)
    if generator is not None and (generator.ground_truth or not append_truth):
        write_ground_truth(generator.ground_truth, truth_path, append=append_truth)
    sender = Producer(client or kinesis_client(settings), settings.stream_name)
    if stop_on_sigterm:
        signal.signal(signal.SIGTERM, lambda *_: sender.stop())
    summary = sender.send(records, **options)
    result: dict[str, Any] = {"mode": mode, "stream": settings.stream_name, "finished_at": time.time()}
    if generator is not None:
        config = generator.config
        result.update(
            seed=config.seed,
            window_start=config.start.isoformat(),
            window_end=config.end.isoformat(),
            ground_truth=str(truth_path),
            anomalies=[asdict(anomaly) for anomaly in generator.ground_truth],
            generator=generator.summary(),
        )
    result["producer"] = summary.as_dict()
    if summary_file is not None:
        summary_file.parent.mkdir(parents=True, exist_ok=True)
        summary_file.write_text(json.dumps(result, indent=2))
    return result
