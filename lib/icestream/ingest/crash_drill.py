"""A crash drill: hold the ingest at one moment of a batch, so that another process can kill it there.

``icestream ingest --pause-at between_commits:2`` runs as usual until the second batch this process
runs reaches ``between_commits`` (its rejects committed, its events not yet), prints one line
(:data:`PAUSE_MARK` ...) and waits there. Whoever watches the output (notebook 02) can then kill the
process at a known moment of a batch, instead of at a random one, and check what a restart makes of
it. After ``--pause-seconds`` the batch goes on as if nothing happened: the pause itself changes
nothing the tables hold. It is off unless asked for, and it is meant for drills and demonstrations,
never for production: a paused ingest falls behind.

The moments are the ingest's fault points (:data:`icestream.ingest.options.PHASES`), the same ones
the crash tests raise at; a pause longer than the table's lease (two minutes) would lose the lease,
so it is capped at :data:`MAX_PAUSE_SECONDS`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from icestream.errors import ConfigError
from icestream.ingest.options import PHASES

PAUSE_MARK = "paused at"  # the start of the line a pause prints (what a watcher waits for)
MAX_PAUSE_SECONDS = 60.0  # well inside the lease's 120 s


def parse_pause(text: str) -> tuple[str, int]:
    """Parse ``PHASE`` or ``PHASE:N`` (N: the N-th batch this process runs, 1 the first).

    Raises:
        ConfigError: For an unknown phase or a batch number below 1.
    """
    phase, _, number = text.strip().partition(":")
    if phase not in PHASES:
        raise ConfigError(f"--pause-at {text!r}: the phase is one of {', '.join(PHASES)} (optionally :N).")
    try:
        batch = int(number) if number else 1
    except ValueError:
        batch = 0
    if batch < 1:
        raise ConfigError(f"--pause-at {text!r}: N counts this process's batches from 1.")
    return phase, batch


def pause_hook(
    phase: str, batch: int = 1, seconds: float = MAX_PAUSE_SECONDS, announce: Callable[[str], None] | None = None
) -> Callable[[str, int], None]:
    """A fault hook (``start_ingest(fault_hook=...)``) that pauses once, at ``phase`` of the ``batch``-th batch.

    Args:
        phase: One of the ingest's phases (``before_read``, ``after_read``, ``between_commits``, ``after_commit``).
        batch: Which batch of this process: 1 the first (batch ids continue from the table's, so they are not used).
        seconds: How long to wait there, at most :data:`MAX_PAUSE_SECONDS`.
        announce: Gets the line that says where it paused (default: printed to stdout at once).

    Returns:
        The hook; it never raises, so without a kill the batch simply goes on.

    Raises:
        ConfigError: For an unknown phase, a batch below 1 or a pause outside 0..MAX_PAUSE_SECONDS.
    """
    parse_pause(f"{phase}:{batch}")
    if not 0 <= seconds <= MAX_PAUSE_SECONDS:
        raise ConfigError(f"--pause-seconds {seconds}: 0 to {MAX_PAUSE_SECONDS:.0f} (the lease must not expire).")
    say = announce or (lambda line: print(line, file=sys.stdout, flush=True))
    seen: list[int] = []  # batch ids that reached the phase (a retried batch reaches it again: counted once)
    paused = False

    def pause(at: str, batch_id: int) -> None:
        nonlocal paused
        if at != phase or paused:
            return
        if batch_id not in seen:
            seen.append(batch_id)
        if len(seen) == batch:
            paused = True
            say(f"{PAUSE_MARK} {phase} of batch {batch_id} (process {os.getpid()}), for {seconds:g} s")
            time.sleep(seconds)

    return pause
