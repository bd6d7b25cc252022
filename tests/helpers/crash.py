"""A simulated crash: the fault hook that stops an ingest (or a file load) at an exact phase, and a
process group for a real one (a runner script with its JVM, SIGKILLed together)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path


class SimulatedCrashError(RuntimeError):
    """Raised by a fault hook to stop the query or the load at an exact phase of a batch."""


def crash_at(phase: str, batch: int | None = None) -> Callable[[str, object], None]:
    """A fault hook that raises :class:`SimulatedCrashError` at ``phase`` of batch ``batch`` (None: of any batch).

    The hook fits both ``start_ingest(fault_hook=...)``, called with ``(phase, batch_id)``, and
    ``load_files(fault=...)``, called with ``(phase, path)``; for a load leave ``batch`` as None.
    The ingest reports it as ``InjectedFaultError: ... SimulatedCrashError: crash at <phase> (<batch id>)``.
    """

    def crash(at: str, batch_id: object) -> None:
        if at == phase and (batch is None or batch_id == batch):
            raise SimulatedCrashError(f"crash at {at} ({batch_id})")

    return crash


@contextlib.contextmanager
def process_group(command: Sequence[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` as its own process group (a runner's Python and its JVM), output to ``log``.

    Yields:
        The process; on leaving, it is SIGKILLed with its group if it still runs.
    """
    with log.open("wb") as output:
        process = subprocess.Popen(
            list(command), env=env, stdout=output, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            yield process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)  # its own process group, nothing else
                process.wait(timeout=30)
