"""The ingest as a real OS process, for the crash campaign: ``python tests/reliability/ingest_runner.py``.

It runs what ``icestream ingest`` runs (settings from ``ICESTREAM_*``, :func:`start_ingest`) with a
fault hook that (1) appends each phase it reaches to ``RELIABILITY_PHASE_LOG``, so the campaign
knows where a kill landed, and (2) when ``RELIABILITY_KILL_PHASE`` is set, SIGKILLs its own process
group (Python and the JVM together, like a machine losing power) at that phase of the
``RELIABILITY_KILL_BATCH``-th batch this process runs, or ``RELIABILITY_KILL_AFTER`` seconds later.
SIGKILL cannot be caught: nothing gets to clean up, which is the point. Unkilled, it stops as
``icestream ingest`` does at ``RELIABILITY_DURATION`` seconds, or as soon as ``RELIABILITY_STOP_FILE``
exists (the concurrent-writers campaign: when the other writers are done).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def running(env: dict[str, str], log: Path) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """This runner as its own process group (Python and its JVM), output to ``log``; SIGKILLed with it on leaving."""
    from tests.helpers.crash import process_group  # the test's process imports this; the script never calls it

    return process_group([sys.executable, __file__], env, log)


def sigkill_trial(
    settings: Any, log_dir: Path, number: int, phase: str | None, batch: int, delay: float, after: float = 0.0
) -> tuple[int | None, str | None]:
    """Run the ingest process once and SIGKILL it; return its exit code and the last phase it reached.

    Args:
        settings: Names the stream and the table (passed on as ``ICESTREAM_*``).
        log_dir: Where the trial's output (``trial-NN.log``) and phase log (``trial-NN.phases``) go.
        number: The trial's number, in those file names.
        phase: The phase at which the process kills itself, in batch ``batch`` (None: no phase).
        batch: Which batch of this process (1: its first) the kill at ``phase`` waits for.
        delay: Seconds after which the trial is killed from outside if it still runs.
        after: Seconds between reaching ``phase`` and the kill (0: at once), to land inside what follows it.
    """
    phase_log = log_dir / f"trial-{number:02d}.phases"
    env = {
        **os.environ,
        "ICESTREAM_STREAM_NAME": settings.stream_name,
        "ICESTREAM_KAFKA_TOPIC": settings.kafka_topic,
        "ICESTREAM_TABLE": settings.table,
        "RELIABILITY_PHASE_LOG": str(phase_log),
        "RELIABILITY_KILL_BATCH": str(batch),
        # A SIGKILLed Spark leaves its temporary folder (about 100 MiB of jars) behind: keep it in the
        # test's own folder, which pytest prunes, not in /tmp (where 300 of them once filled the disk).
        "SPARK_LOCAL_DIRS": str(log_dir / "spark-local"),
    }
    if phase:
        env["RELIABILITY_KILL_PHASE"] = phase
        env["RELIABILITY_KILL_AFTER"] = str(after)
    with running(env, log_dir / f"trial-{number:02d}.log") as process, contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=delay)  # past it, leaving the block SIGKILLs the trial's process group
    lines = phase_log.read_text().split("\n") if phase_log.exists() else []
    phases = [line.split()[1] for line in lines if line.strip()]
    return process.returncode, (phases[-1] if phases else None)


def main() -> int:
    """Run the ingest until it is killed or stops."""
    from icestream.config import load_settings
    from icestream.ingest.query import start_ingest

    log_path = Path(os.environ["RELIABILITY_PHASE_LOG"])
    kill_phase = os.environ.get("RELIABILITY_KILL_PHASE")
    kill_batch = int(os.environ.get("RELIABILITY_KILL_BATCH", "1"))
    kill_after = float(os.environ.get("RELIABILITY_KILL_AFTER", "0"))
    batches: list[int] = []
    log = log_path.open("a", buffering=1)  # a line reaches the kernel before the next statement runs

    def hook(phase: str, batch_id: int) -> None:
        if batch_id not in batches:
            batches.append(batch_id)
        log.write(f"{time.time():.3f} {phase} {batch_id}\n")
        if phase == kill_phase and len(batches) == kill_batch:
            if kill_after > 0:  # the batch goes on; the kill lands inside what follows the phase
                threading.Timer(kill_after, os.killpg, (0, signal.SIGKILL)).start()
            else:
                os.killpg(0, signal.SIGKILL)

    query = start_ingest(
        settings=load_settings(),
        trigger_seconds=float(os.environ.get("RELIABILITY_TRIGGER", "0.5")),
        max_records_per_shard=int(os.environ.get("RELIABILITY_MAX_RECORDS", "40")),
        # Shards grouped in every campaign: two to a read task, read side by side and sharing their
        # shares (the default groups beyond the session's cores, and the campaigns' streams have 2).
        shards_per_task=int(os.environ.get("RELIABILITY_SHARDS_PER_TASK", "2")),
        available_now=os.environ.get("RELIABILITY_AVAILABLE_NOW") == "1",
        duration_seconds=float(os.environ.get("RELIABILITY_DURATION", "180")),  # bounded even if never killed
        fault_hook=hook,
        source=os.environ.get("RELIABILITY_SOURCE", "kinesis"),
    )
    log.write(f"{time.time():.3f} started -1\n")
    stop_file = os.environ.get("RELIABILITY_STOP_FILE")
    while not query.await_termination(timeout=0.2):
        if stop_file and Path(stop_file).exists():
            query.stop()
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
