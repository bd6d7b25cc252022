"""SIGKILL campaign on a change stream, with compaction committing from another process.

A live producer sends an entity stream of orders (:func:`icestream.synthetic.entities.order_changes`:
creates, updates, deletes, re-creates, late and replayed changes, malformed records) to a 2-shard
stream. The change ingest (merge-on-read, one ``MERGE`` per batch) runs as its own process and is
SIGKILLed at every phase of a batch, and at random moments that land inside a ``MERGE``'s planning,
write or commit. Meanwhile a second process loops compaction, manifest rewrites and snapshot expiry
on the same table. After a final drain, DuckDB (not Spark) reads the table: every order equal to
the truth key by key, every deleted order a tombstone, every malformed record rejected exactly once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from icestream.ingest.changes import ChangeSpec
from icestream.ingest.options import PHASES
from icestream.lake.ddl import create_rejects_table
from icestream.lake.keyed import create_keyed_table
from icestream.lake.table import LakeTable
from icestream.synthetic.entities import ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER, order_changes
from tests.helpers.changes import change_settings, drain_changes, duckdb_rows, expected_rows
from tests.helpers.streams import PacedProducer
from tests.reliability import figures
from tests.reliability.figures import size
from tests.reliability.ingest_runner import sigkill_trial
from tests.reliability.writer_runner import finish, spawn


def test_sigkill_campaign_on_a_change_stream_with_compaction_in_another_process(spark, emulator, tmp_path: Path,
                                                                                monkeypatch) -> None:  # fmt: skip
    settings = change_settings("crashcdc")
    spec = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER)
    for name, value in (("COLUMNS", ORDER_COLUMNS), ("KEY", ORDER_KEY), ("ORDER", ORDER_ORDER)):
        monkeypatch.setenv(f"ICESTREAM_CHANGES_{name}", value)  # the trials' processes read them as settings
    # The table exists before the maintenance process starts (a trial would make it otherwise).
    create_keyed_table(spark, settings.table_name, spec.keyed, "orders for the campaign", settings.changes_mode)
    create_rejects_table(spark, settings)
    seed = int(os.environ.get("RELIABILITY_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    # Bounded: one kill at each phase (the plain campaign kills at random moments too); full: three
    # rounds of those and two kills at random moments.
    trials = size(len(PHASES), 3 * (len(PHASES) + 2))
    stream = order_changes(orders=60, changes=size(1_200, 3_600), seed=seed)
    # A share of the stream before each trial and the last one for the drain: every trial has batches to kill in.
    producer = PacedProducer(settings, stream.records, per_call=12, interval=0.3, shares=trials + 1)
    maintain_seconds = float(size(60, 240))
    base_env = {**os.environ, "ICESTREAM_STREAM_NAME": settings.stream_name, "ICESTREAM_TABLE": settings.table}
    maintain_log, maintain_result = tmp_path / "maintain.log", tmp_path / "maintain.json"
    maintain = spawn("writer_runner.py", ["maintain"], {
        **base_env, "WRITER_SECONDS": str(maintain_seconds), "WRITER_RESULT": str(maintain_result),
    }, maintain_log)  # fmt: skip
    producer.thread.start()
    phases_hit: Counter[str] = Counter()
    try:
        for number in range(trials):
            phase = PHASES[number % len(PHASES)] if number % (len(PHASES) + 2) < len(PHASES) else None
            producer.release()
            code, last = sigkill_trial(
                settings, tmp_path, number, phase, rng.randint(1, size(2, 3)),
                rng.uniform(6.0, 20.0) if phase is None else 150.0,
            )  # fmt: skip
            log_tail = (tmp_path / f"trial-{number:02d}.log").read_text(errors="replace")[-2000:]
            assert code == -signal.SIGKILL, f"trial {number} ended with {code}, not SIGKILL:\n{log_tail}"
            phases_hit[last or "start"] += 1
    finally:
        producer.finish()
        finish(maintain, maintain_seconds + 240, maintain_log)

    spark.catalog.refreshTable(settings.table_name)
    spark.catalog.refreshTable(settings.rejects_table_name)
    drain_changes(spark, settings, spec, progress_file=tmp_path / "p.jsonl")
    table = LakeTable(spark, settings.table_name)
    found, expected = duckdb_rows(table), expected_rows(stream)
    wrong = sum(found.get(key) != row for key, row in expected.items())
    revived = len(set(found) - set(expected))
    tombstones = {row.order_id for row in spark.table(settings.table_name).where("is_deleted").collect()}
    rejects = Counter((row.shard_id, row.sequence_number) for row in spark.table(settings.rejects_table_name).collect())
    maintained = json.loads(maintain_result.read_text())
    figures.record(
        "crash: change data", f"SIGKILL + compaction, seed {seed}", trials=trials, records=len(stream.records),
        orders=len(expected), deleted=len(stream.deleted), late=stream.sent["late"], replayed=stream.sent["replay"],
        wrong=wrong, revived=revived, rejects=sum(rejects.values()), malformed_sent=stream.sent["malformed"],
        compaction_runs=maintained["done"].get("rewrite_data_files", 0),
    )  # fmt: skip
    assert (wrong, revived) == (0, 0), f"{wrong} orders differ from the truth, {revived} deleted orders came back"
    assert tombstones == stream.deleted
    assert sum(rejects.values()) == stream.sent["malformed"]
    assert max(rejects.values(), default=1) == 1, "a malformed record was rejected twice"
    assert set(PHASES) <= set(phases_hit), f"phases hit: {dict(phases_hit)}"
    assert maintained["done"].get("rewrite_data_files", 0) >= 1, maintained
