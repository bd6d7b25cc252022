"""SIGKILL campaign on real_time_metrics, with compaction of both tables committing from another process.

A live producer sends generated events (repeats, late events, malformed records) to a 2-shard
stream. The ingest runs with ``--metrics`` as its own process and is SIGKILLed at every phase of a
batch, at the moment before the metrics' refresh, 0.1 to 1.5 s into that refresh (inside its
incremental read, or its ``MERGE``'s planning, write or commit: a refresh takes about 1.5 s here),
and at random moments. Meanwhile a second process loops compaction, manifest
rewrites and snapshot expiry on the events table *and* the metrics table. After a final drain,
DuckDB (not Spark) reads the metrics table: every (minute, event type, device) group equal to the
truth computed in Python from what was sent, and to DuckDB's full query over the events table.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from icestream.ingest.options import PHASES
from icestream.lake.continuous_aggregate import create_metrics_table
from icestream.lake.table import LakeTable
from icestream.synthetic.generator import backfill_config, generate
from tests.helpers.ingest import drain, refresh_tables
from tests.helpers.metrics import duckdb_full_query, duckdb_metrics, truth
from tests.helpers.streams import PacedProducer
from tests.reliability import figures
from tests.reliability.figures import size
from tests.reliability.ingest_runner import sigkill_trial
from tests.reliability.writer_runner import finish, spawn

KILL_PHASES = (*PHASES, "before_metrics")  # before_metrics: the events committed, the refresh about to begin
# A trial: the phase it is killed at (None: a random moment) and whether the kill lands inside what follows it.
INSIDE_REFRESH = ("before_metrics", True)
FULL_ROUND = (*((phase, False) for phase in KILL_PHASES), INSIDE_REFRESH, (None, False))
BOUNDED_PLAN = (("between_commits", False), ("after_commit", False), ("before_metrics", False), INSIDE_REFRESH)


def test_sigkill_campaign_on_the_metrics_with_compaction_of_both_tables_in_another_process(
    spark, fresh, tmp_path: Path, monkeypatch
) -> None:
    settings = fresh(shards=2, prefix="crashmx")
    monkeypatch.setenv("ICESTREAM_METRICS", "true")  # the trials' processes read it as a setting
    # The metrics table exists before the maintenance process starts (a trial would make it otherwise).
    create_metrics_table(spark, settings.metrics_table_name, settings.table_name)
    seed = int(os.environ.get("RELIABILITY_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    # Bounded: a kill at each phase where the metrics can part from the events (the events' commit, after
    # both commits, before the refresh) and one inside the refresh; a kill before a batch commits anything
    # is the plain campaign's. Full: three rounds of every phase, inside the refresh and a random moment.
    plan = BOUNDED_PLAN if not figures.FULL else 3 * FULL_ROUND
    trials = len(plan)
    config = backfill_config(hours=1, count=size(1_200, 4_500), end=datetime(2026, 11, 21, tzinfo=UTC),
                             seed=seed, late_rate=0.05)  # fmt: skip
    records, _ = generate(config)
    # A share of the records before each trial and the last one for the drain: every trial has batches to kill in.
    pairs = [(record.data, record.partition_key) for record in records]
    producer = PacedProducer(settings, pairs, 15, 0.3, shares=trials + 1)
    maintain_seconds = float(size(60, 240))
    maintain_log, maintain_result = tmp_path / "maintain.log", tmp_path / "maintain.json"
    maintain = spawn("writer_runner.py", ["maintain"], {
        **os.environ, "ICESTREAM_STREAM_NAME": settings.stream_name, "ICESTREAM_TABLE": settings.table,
        "WRITER_TABLES": f"{settings.table},{settings.table}_metrics", "WRITER_SECONDS": str(maintain_seconds),
        "WRITER_RESULT": str(maintain_result),
    }, maintain_log)  # fmt: skip
    producer.thread.start()
    phases_hit: Counter[str] = Counter()
    try:
        for number, (phase, inside) in enumerate(plan):
            # Inside the refresh: its read, its MERGE's plan, write or commit.
            after = rng.uniform(0.1, 1.5) if inside else 0.0
            producer.release()
            code, last = sigkill_trial(
                settings, tmp_path, number, phase, rng.randint(1, size(2, 3)),
                rng.uniform(6.0, 20.0) if phase is None else 150.0, after,
            )  # fmt: skip
            log_tail = (tmp_path / f"trial-{number:02d}.log").read_text(errors="replace")[-2000:]
            assert code == -signal.SIGKILL, f"trial {number} ended with {code}, not SIGKILL:\n{log_tail}"
            phases_hit[last or "start"] += 1
    finally:
        producer.finish()
        finish(maintain, maintain_seconds + 240, maintain_log)

    refresh_tables(spark, settings, settings.metrics_table_name)
    drain(spark, settings, metrics=True, progress_file=tmp_path / "p.jsonl")
    refresh_tables(spark, settings, settings.metrics_table_name)
    found = duckdb_metrics(LakeTable(spark, settings.metrics_table_name))
    expected = truth(record.data for record in records if record.kind == "event")
    full = duckdb_full_query(LakeTable(spark, settings.table_name))
    wrong = sum(found.get(group) != answer for group, answer in expected.items())
    extra = len(set(found) - set(expected))
    maintained = json.loads(maintain_result.read_text())
    figures.record(
        "crash: metrics", f"SIGKILL + compaction of both tables, seed {seed}", trials=trials, records=len(records),
        events=sum(answer[0] for answer in expected.values()), groups=len(expected), wrong=wrong, extra=extra,
        late=sum(record.late for record in records), killed_in_refresh=phases_hit["before_metrics"],
        compaction_runs=sum(count for step, count in maintained["done"].items() if step.startswith("rewrite_data")),
    )  # fmt: skip
    assert (wrong, extra) == (0, 0), f"{wrong} groups differ from the truth, {extra} groups that should not exist"
    assert found == full, "the metrics differ from DuckDB's full query over the events table"
    assert {phase for phase, _ in plan if phase} <= set(phases_hit), f"phases hit: {dict(phases_hit)}"
    assert maintained["done"].get(f"rewrite_data_files ({settings.table}_metrics)", 0) >= 1, maintained
