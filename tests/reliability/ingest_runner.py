"""The ingest as a real OS process, for the crash campaign: ``python tests/reliability/ingest_runner.py``.

It runs what ``icestream ingest`` runs (settings from ``ICESTREAM_*``, :func:`start_ingest`) with a
fault hook that (1) appends each phase it reaches to ``RELIABILITY_PHASE_LOG``, so the campaign
knows where a kill landed, and (2) when ``RELIABILITY_KILL_PHASE`` is set, SIGKILLs its own process
group (Python and the JVM together, like a machine losing power) at that phase of the
``RELIABILITY_KILL_BATCH``-th batch this process runs. SIGKILL cannot be caught: nothing gets to
clean up, which is the point.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def running(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """This runner as its own process group (Python and its JVM), output to ``log``.

    Yields:
        The process; on leaving, it is SIGKILLed with its group if it still runs.
    """
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, __file__], env=env, stdout=output, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            yield process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)  # its own process group, nothing else
                process.wait(timeout=30)


def main() -> int:
    """Run the ingest until it is killed or stops."""
    from icestream.config import load_settings
    from icestream.ingest import start_ingest

    log_path = Path(os.environ["RELIABILITY_PHASE_LOG"])
    kill_phase = os.environ.get("RELIABILITY_KILL_PHASE")
    kill_batch = int(os.environ.get("RELIABILITY_KILL_BATCH", "1"))
    batches: list[int] = []
    log = log_path.open("a", buffering=1)  # a line reaches the kernel before the next statement runs

    def hook(phase: str, batch_id: int) -> None:
        if batch_id not in batches:
            batches.append(batch_id)
        log.write(f"{time.time():.3f} {phase} {batch_id}\n")
        if phase == kill_phase and len(batches) == kill_batch:
            os.killpg(0, signal.SIGKILL)

    query = start_ingest(
        settings=load_settings(),
        trigger_seconds=float(os.environ.get("RELIABILITY_TRIGGER", "0.5")),
        max_records_per_shard=int(os.environ.get("RELIABILITY_MAX_RECORDS", "40")),
        available_now=os.environ.get("RELIABILITY_AVAILABLE_NOW") == "1",
        duration_seconds=float(os.environ.get("RELIABILITY_DURATION", "180")),  # bounded even if never killed
        fault_hook=hook,
    )
    log.write(f"{time.time():.3f} started -1\n")
    query.await_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
