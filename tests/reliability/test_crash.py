"""Crash campaign: SIGKILL the ingest process at random moments while a producer sends, restart, check.

Each trial starts the ingest as its own OS process (``ingest_runner.py``: Python plus its JVM, in
one process group) and kills the whole group with SIGKILL, either at a chosen phase of a chosen
batch (so every phase is hit) or after a random delay (so the moments in between are hit too: start-up,
mid-read, mid-commit). The producer keeps sending throughout. At the end one ``available_now`` run
drains the stream, and the tables are compared with what the producer sent.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from icestream.ingest.options import PHASES
from tests.reliability import figures
from tests.reliability.figures import size
from tests.reliability.ingest_runner import sigkill_trial
from tests.reliability.workload import Workload, drain_and_verify

# Where a kill landed, named by the last phase the process reported before it died.
LANDED = {
    None: "starting up (no batch yet)",
    "started": "planning a batch",
    "before_read": "reading shards",
    "after_read": "committing rejects",
    "between_commits": "committing events",
    "after_commit": "after commit, before next trigger",
}


def test_sigkill_campaign_loses_and_duplicates_nothing(spark, fresh, tmp_path: Path) -> None:
    settings = fresh(shards=2, prefix="crash")
    seed = int(os.environ.get("RELIABILITY_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    # Bounded: 4 trials, the fewest that kill at every phase once (each trial starts a Python process
    # and its JVM, most of a trial's time); full: 24, half of them at random moments in between.
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
            code, last = sigkill_trial(settings, tmp_path, number, phase, batch, delay)
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

    verdict = drain_and_verify(spark, settings, workload.ledger, tmp_path / "p.jsonl")

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
