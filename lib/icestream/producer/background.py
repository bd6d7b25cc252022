"""The background producer: live production in its own process, for a bounded duration.

It runs ``icestream produce`` (live mode) detached from the kernel that starts it, so a notebook can
start it and the next one reads a live stream. Like the emulator it keeps a state file under
``run_dir`` (pid and start time, see :mod:`icestream.runtime.processes`): start replaces or refuses a running
one, status and stop only ever concern the process this module started. Its summary is the live
run's (:func:`icestream.producer.run.run_summary_path` with mode ``live``), written as it ends.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.producer.run import RunSummary, read_run_summary, ready_path, run_summary_path
from icestream.producer.target import KINESIS, check_target
from icestream.runtime import processes
from icestream.synthetic.ground_truth import parse_anomalies

STATE_FILE = "producer.json"
LOG_FILE = "producer.log"
MAX_BACKGROUND_SECONDS = 6 * 3600.0  # background production is always bounded
# After the last trigger that reads a producer's last records: that batch's commit (a live batch takes about
# a second; 02's AvailableNow pass after the query reads whatever a slower one left, so more is idle time).
DRAIN_MARGIN_SECONDS = 3.0
# A stop waits this long for a producer just started to handle SIGTERM (it imports, plans, connects first).
READY_WAIT_SECONDS = 120.0
_COMMAND_MARKS = ("icestream.cli", "produce")  # what its command line holds (see processes.is_ours)


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
    summary: RunSummary | None
    detail: str


def _state_path(settings: Settings) -> Path:
    return settings.path("run_dir") / STATE_FILE


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
    values["ICESTREAM_KAFKA_TOPIC"] = settings.kafka_topic
    values["ICESTREAM_KAFKA_SECURITY"] = settings.kafka_security
    if settings.kafka_bootstrap:  # else the child finds the local broker by the same run folder
        values["ICESTREAM_KAFKA_BOOTSTRAP"] = settings.kafka_bootstrap
    return values


def start_background_producer(
    settings: Settings,
    *,
    rate: float = 100.0,
    duration: float | None = None,
    count: int | None = None,
    seed: int | None = None,
    bad_rate: float = 0.005,
    duplicate_rate: float = 0.01,
    late_rate: float = 0.02,
    anomalies: str = "none",
    replace: bool = True,
    to: str = KINESIS,
) -> BackgroundProducerStatus:
    """Start live production in its own process, for ``duration`` seconds or ``count`` records.

    The process outlives the notebook kernel that starts it (so the next notebook reads a live
    stream); it writes its summary to the live run's summary file when it ends, and the ground truth
    of any anomalies to :func:`icestream.synthetic.ground_truth.ground_truth_path` (appended).

    Args:
        settings: Names the stream, endpoint and run folder.
        rate: Records per second (every kind: events, duplicates, malformed).
        duration: Seconds to run (at most six hours); 300 when neither this nor ``count`` is given.
        count: Records to send, exactly (instead of a duration; ``count / rate`` at most six hours).
        seed: Generator seed (None: a random one, so each run has new event ids).
        bad_rate: Malformed records per event.
        duplicate_rate: Share of events sent twice.
        late_rate: Share of events sent late.
        anomalies: Anomalies to inject (see :func:`icestream.synthetic.ground_truth.parse_anomalies`),
            default none.
        replace: Stop a background producer that already runs first; else raise if one runs.
        to: ``kinesis`` (the stream) or ``kafka`` (the topic), as ``icestream produce --to``.

    Returns:
        Its status just after the start.

    Raises:
        ConfigError: If a value is out of range, or one already runs and ``replace`` is False.
    """
    if not rate > 0:
        raise ConfigError(f"rate: {rate} must be a positive number of records per second.")
    check_target(to)
    if duration is not None and count is not None:
        raise ConfigError("background production runs for a duration or a count of records, not both.")
    if count is not None and count < 1:
        raise ConfigError(f"count: {count}; give at least 1 record.")
    seconds = count / rate if count is not None else duration or 300.0
    if not 0 < seconds <= MAX_BACKGROUND_SECONDS:
        raise ConfigError(
            f"{seconds:.0f} s of production; background production needs 0 < duration ≤ {MAX_BACKGROUND_SECONDS:.0f} s."
        )
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
    summary_file = run_summary_path(settings, "live")
    summary_file.unlink(missing_ok=True)
    log_path = run_dir / LOG_FILE
    bound = ["--count", str(count)] if count is not None else ["--duration", str(seconds)]
    command = [
        sys.executable,
        "-m",
        "icestream.cli",
        "produce",
        "--rate",
        str(rate),
        *bound,
        "--bad-rate",
        str(bad_rate),
        "--duplicate-rate",
        str(duplicate_rate),
        "--late-rate",
        str(late_rate),
        "--anomalies",
        anomalies,
        "--no-progress",
        "--to",
        to,
    ]
    if seed is not None:
        command += ["--seed", str(seed)]
    process = processes.spawn(command, log_path, env={**os.environ, **_settings_environment(settings)})
    started = time.time()
    processes.write_state(
        _state_path(settings),
        process.pid,
        started_at=started,
        ends_by=started + seconds,
        log=str(log_path),
        summary_file=str(summary_file),
        command=command,
    )
    return background_producer_status(settings)


def background_producer_status(settings: Settings) -> BackgroundProducerStatus:
    """Report whether the background producer runs, and its summary once it has ended."""
    summary_file = run_summary_path(settings, "live")
    summary = read_run_summary(summary_file)
    state = processes.read_state(_state_path(settings))
    if state is None:
        return BackgroundProducerStatus(False, None, None, None, None, str(summary_file), summary, "not started")
    running = processes.is_ours(state, _COMMAND_MARKS)
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


def stop_background_producer(settings: Settings, timeout: float = 30.0) -> bool:
    """Stop the background producer this module started, if it runs; it writes its summary first.

    A producer started a moment ago may not handle SIGTERM yet (it is still importing, planning,
    connecting): the stop first waits, up to ``READY_WAIT_SECONDS``, for its ready file, so even a
    stop right after the start ends with a summary.

    Args:
        settings: Names the run folder.
        timeout: Seconds to wait after SIGTERM before SIGKILL.

    Returns:
        True if a process was stopped.
    """
    state = processes.read_state(_state_path(settings))
    if state is None or not processes.is_ours(state, _COMMAND_MARKS):
        return False
    pid = int(state["pid"])
    ready = ready_path(settings, pid)
    deadline = time.monotonic() + READY_WAIT_SECONDS
    while not ready.exists() and processes.running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    processes.terminate(pid, timeout)  # the CLI handles SIGTERM: finish the batch, write the summary
    ready.unlink(missing_ok=True)  # a SIGKILL after the timeout leaves it
    return True


def wait_background_producer(settings: Settings, timeout: float) -> BackgroundProducerStatus:
    """Wait up to ``timeout`` seconds for the background producer to end; return its status."""
    deadline = time.monotonic() + timeout
    status = background_producer_status(settings)
    while status.running and time.monotonic() < deadline:
        time.sleep(0.2)
        status = background_producer_status(settings)
    return status


def keep_producing(
    settings: Settings, seconds: float, *, rate: float = 100.0, now: float | None = None
) -> BackgroundProducerStatus:
    """Live production for at least ``seconds`` from now: the running producer if it sends that long, else a new one.

    An ingest that reads a backlog first keeps up with live traffic only once the backlog is read;
    a producer started one notebook earlier may have ended by then, leaving no live batch to watch.
    A producer that would end sooner is replaced (what it sent stays in the stream, as backlog).

    Args:
        settings: Names the stream and run folder.
        seconds: Live production wanted from now; 0 or less starts nothing.
        rate: Records per second of a producer started here.
        now: The wall clock in epoch seconds (default: now).

    Returns:
        The background producer's status afterwards.
    """
    status = background_producer_status(settings)
    now = time.time() if now is None else now
    if seconds <= 0 or (status.running and status.ends_by is not None and status.ends_by >= now + seconds):
        return status
    return start_background_producer(settings, rate=rate, duration=seconds, replace=True)


def caught_up(query: Any) -> bool:
    """Whether an ingest query has read its backlog: a batch's read reached every shard's newest record,
    or a trigger found nothing new (a stream already drained reports no batch at all)."""
    latest = query.recent_progress[-1] if query.recent_progress else None
    if latest is not None and latest.get("millis_behind_latest") == 0:
        return True
    status = query.status
    return status.get("message") == "Waiting for next trigger" and status.get("isDataAvailable") is False


def live_window(
    query: Any,
    settings: Settings,
    *,
    seconds: float,
    rate: float,
    trigger_seconds: float,
    poll: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> BackgroundProducerStatus | None:
    """Live production once ``query`` has read the backlog, then a graceful stop once it has read that too.

    A query that starts on a backlog keeps up with live traffic only after it; live production
    started with the query would be spent while a busy machine reads the backlog (a first batch
    took 19 s at load 7 and 50 s at load 20 on 2 cores). So it starts here, when the query has
    caught up, runs ``seconds`` (:func:`keep_producing`) and the query stops when its last records
    are committed (:func:`ingest_seconds`). Run it in a thread beside the query (:func:`start_live_window`).

    Args:
        query: The running ingest (``recent_progress``, ``status``, ``is_active``, ``stop()``).
        settings: Names the stream and run folder.
        seconds: Live production after the backlog; 0: none started (one already running is waited for).
        rate: Records per second of a producer started here.
        trigger_seconds: The query's trigger interval.
        poll: Seconds between looks at the query.
        sleep: Waits (tests pass a fake one).

    Returns:
        The producer's status once started, or None if the query stopped first.
    """
    while query.is_active and not caught_up(query):
        sleep(poll)
    if not query.is_active:
        return None
    status = keep_producing(settings, seconds, rate=rate)
    sleep(ingest_seconds(status, 0.0, trigger_seconds))
    query.stop()
    return status


def start_live_window(query: Any, settings: Settings, **options: Any) -> threading.Thread:
    """:func:`live_window` in a daemon thread (the notebook's dashboard watches the query meanwhile)."""
    thread = threading.Thread(target=live_window, args=(query, settings), kwargs=options, daemon=True)
    thread.start()
    return thread


def ingest_seconds(
    status: BackgroundProducerStatus, minimum: float, trigger_seconds: float, now: float | None = None
) -> float:
    """How long an ingest should run to commit everything a running background producer will send.

    The producer sends its last (late) records by ``ends_by``; the ingest then needs one trigger to
    read them and one more to see the shards at their tip, and a margin for that batch's commit.

    Args:
        status: The background producer as seen now (:func:`background_producer_status`).
        minimum: The ingest runs at least this long (seconds).
        trigger_seconds: The ingest's trigger interval.
        now: The wall clock in epoch seconds (default: now).

    Returns:
        ``minimum``, or longer while the producer still runs.
    """
    if not status.running or status.ends_by is None:
        return minimum
    now = time.time() if now is None else now
    return max(minimum, status.ends_by - now + 2 * trigger_seconds + DRAIN_MARGIN_SECONDS)
