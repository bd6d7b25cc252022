"""A simulated crash: the fault hook that stops an ingest (or a file load) at an exact phase."""

from __future__ import annotations

from collections.abc import Callable


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
