"""Crash campaign: SIGKILL the ingest process at random moments while a producer sends, restart, check.

Each trial starts the ingest as its own OS process (``ingest_runner.py``: Python plus its JVM, in
one process group) and kills the whole group with SIGKILL, either at a chosen phase of a chosen
batch (so every phase is hit) or after a random delay (so the moments in between are hit too: start-up,
mid-read, mid-commit). The producer keeps sending throughout. At the end one ``available_now`` run
drains the stream, and the tables are compared with what the producer sent.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from icestream.ingest import start_ingest
from icestream.ingest.options import PHASES
from tests.reliability import figures
from tests.reliability.figures import size
from tests.reliability.ingest_runner import running
from tests.reliability.workload import Workload, verify

pytestmark = pytest.mark.reliability

# Where a kill landed, named by the last phase the process reported before it died.
LANDED = {
    None: "starting up (no batch yet)",
    "started": "planning a batch",
    "before_read": "reading shards",
    "after_read": "committing rejects",
    "between_commits": "committing events",
    "after_commit": "after commit, before next trigger",
}


def _trial(settings, log_dir: Path, number: int, phase: str | None, batch: int, delay: float) -> tuple[int, str | None]:
    """Run the ingest process once and kill it; return its exit code and the last phase it reached."""
    phase_log = log_dir / f"trial-{number:02d}.phases"
    env = {
        **os.environ,
        "ICESTREAM_STREAM_NAME": settings.stream_name,
        "ICESTREAM_TABLE": settings.table,
        "RELIABILITY_PHASE_LOG": str(phase_log),
        "RELIABILITY_KILL_BATCH": str(batch),
    }
    if phase:
        env["RELIABILITY_KILL_PHASE"] = phase
    with running(env, log_dir / f"trial-{number:02d}.log") as process, contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=delay)  # past it, leaving the block SIGKILLs the trial's process group
    lines = phase_log.read_text().split("\n") if phase_log.exists() else []
    phases = [line.split()[1] for line in lines if line.strip()]
    return process.returncode, (phases[-1] if phases else None)


def test_sigkill_campaign_loses_and_duplicates_nothing(spark, fresh, tmp_path: Path) -> None:
    settings = fresh(shards=2, prefix="crash")
    seed = int(os.environ.get("RELIABILITY_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    trials = size(4, 24)
    # Phase-targeted trials cover every phase; the others are killed at a random moment.
    targeted = [PHASES[index % len(PHASES)] for index in range(trials)] if trials <= len(PHASES) else None
    workload = Workload(settings).start(per_call=12, interval=0.3)
    landed: Counter[str] = Counter()
    phases_hit: set[str] = set()
    kills = 0
    try:
        for number in range(trials):
            if targeted is not None:
                phase = targeted[number]
            else:
                phase = PHASES[number // 2 % len(PHASES)] if number % 2 == 0 else None
            batch = rng.randint(1, size(2, 3))
            delay = 150.0 if phase else rng.uniform(4.0, 25.0)  # a targeted kill has a backstop too
            code, last = _trial(settings, tmp_path, number, phase, batch, delay)
            log_tail = (tmp_path / f"trial-{number:02d}.log").read_text(errors="replace")[-2000:]
            assert code == -signal.SIGKILL, f"trial {number} ended with {code}, not SIGKILL:\n{log_tail}"
            kills += 1
            landed[LANDED.get(last, last or "?")] += 1
            if phase and last == phase:
                phases_hit.add(phase)
            elif last in PHASES:
                phases_hit.add(last)  # a random kill right after a phase also hits it
    finally:
        workload.stop()

    for table in (settings.table_name, settings.rejects_table_name):
        spark.catalog.refreshTable(table)
    drain = start_ingest(spark, settings, available_now=True, trigger_seconds=0, progress_file=tmp_path / "p.jsonl")
    assert drain.await_termination(timeout=600)
    verdict = verify(spark, settings, workload.ledger)

    figures.record(
        "crash", f"SIGKILL, seed {seed}", trials=trials, kills=kills, events=verdict.events,
        duplicates_sent=workload.ledger.duplicates_sent, malformed=verdict.malformed, lost=verdict.lost,
        duplicated=verdict.duplicated, rejects_lost=verdict.rejects_lost,
        rejects_duplicated=verdict.rejects_duplicated, order_violations=verdict.order_violations,
    )  # fmt: skip
    for where, count in sorted(landed.items()):
        figures.record("crash: where the kills landed", where, kills=count)
    assert verdict.exact, verdict
    assert phases_hit == set(PHASES), f"phases hit: {sorted(phases_hit)}; kills landed: {dict(landed)}"
