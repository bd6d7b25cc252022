"""Crash campaign on Kafka: SIGKILL ``ingest --source kafka`` at every phase of a batch while a producer
sends, add a partition to the topic mid-run, restart, drain, check.

The same campaign as the Kinesis one (``test_crash.py``), on the session's real broker: each trial is
the ingest as its own OS process (``ingest_runner.py`` with ``RELIABILITY_SOURCE=kafka``: Python, its
JVM and Spark's Kafka consumers), killed with its whole process group. After the second trial the
topic grows from 2 partitions to 3; Kafka then sends some keys to the new partition (its key
hashing changes), which the ingest must find and read from its first offset. At the end one
``available_now`` run drains the topic, and both tables are compared with what the producer sent.

Order: Kafka keeps a key's order within a partition. When partitions are added, a key's later
records may land on the new partition while earlier ones wait on the old: Kafka promises no order
between them, and neither does the ingest (docs/ingest.md). So order is checked per partition
(each partition's records committed in offset order, a key's counter rising within a partition).
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from icestream.ingest.options import PHASES
from icestream.kafka.connection import kafka_connection
from icestream.kafka.topics import add_partitions, partitions
from tests.helpers.waiting import wait_until
from tests.reliability import figures
from tests.reliability.figures import size
from tests.reliability.ingest_runner import sigkill_trial
from tests.reliability.workload import Workload, drain_and_verify

GROW_AFTER_TRIAL = 1  # the topic gets its third partition after this trial
METADATA_WAIT_SECONDS = 30.0  # a bound on the broker showing the new partition, not a measurement


def partition_order_violations(rows: list) -> int:
    """Within each partition: a record committed in a later batch than one after it, or a key's counter not rising."""
    by_partition: dict[str, list] = {}
    for row in rows:
        by_partition.setdefault(row.shard_id, []).append(row)
    violations = 0
    for found in by_partition.values():
        found.sort(key=lambda row: int(row.sequence_number))
        last_seen: dict[str, int] = {}
        for earlier, later in itertools.pairwise(found):
            violations += earlier.ingest_ts > later.ingest_ts
        for row in found:
            counter = int(row.properties["n"])
            violations += counter <= last_seen.get(row.user_id, 0)
            last_seen[row.user_id] = counter
    return violations


def test_sigkill_campaign_on_kafka_with_a_partition_added_loses_and_duplicates_nothing(
    spark, kafka_fresh, tmp_path: Path, monkeypatch
) -> None:
    settings = kafka_fresh(partitions=2, prefix="kcrash")
    connection = kafka_connection(settings)
    monkeypatch.setenv("RELIABILITY_SOURCE", "kafka")
    seed = int(os.environ.get("RELIABILITY_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    trials = size(len(PHASES), 16)
    workload = Workload(settings, to="kafka").start(per_call=12, interval=0.3)
    landed: Counter[str] = Counter()
    phases_hit: set[str] = set()
    try:
        for number in range(trials):
            phase = PHASES[number % len(PHASES)] if number % 4 != 3 or trials <= len(PHASES) else None
            batch = rng.randint(1, size(2, 3))
            delay = 150.0 if phase else rng.uniform(4.0, 25.0)
            code, last = sigkill_trial(settings, tmp_path, number, phase, batch, delay)
            log_tail = (tmp_path / f"trial-{number:02d}.log").read_text(errors="replace")[-2000:]
            assert code == -signal.SIGKILL, f"trial {number} ended with {code}, not SIGKILL:\n{log_tail}"
            landed[last or "starting up"] += 1
            if last in PHASES:
                phases_hit.add(last)
            if number == GROW_AFTER_TRIAL:
                add_partitions(connection, 3)
                wait_until(lambda: len(partitions(connection)) == 3, METADATA_WAIT_SECONDS, message="partition 2")
    finally:
        workload.stop()

    verdict = drain_and_verify(spark, settings, workload.ledger, tmp_path / "p.jsonl", source="kafka")
    rows = (
        spark.table(settings.table_name)
        .select("event_id", "user_id", "properties", "ingest_ts", "shard_id", "sequence_number")
        .collect()
    )
    on_new_partition = sum(row.shard_id == "partition-000000000002" for row in rows)
    figures.record(
        "crash on Kafka", f"SIGKILL, seed {seed}", trials=trials, events=verdict.events,
        duplicates_sent=workload.ledger.duplicates_sent, malformed=verdict.malformed, lost=verdict.lost,
        duplicated=verdict.duplicated, rejects_lost=verdict.rejects_lost,
        rejects_duplicated=verdict.rejects_duplicated, on_added_partition=on_new_partition,
    )  # fmt: skip
    assert (verdict.lost, verdict.duplicated, verdict.unexpected) == (0, 0, 0), verdict
    assert (verdict.rejects_lost, verdict.rejects_duplicated) == (0, 0), verdict
    assert partition_order_violations(rows) == 0
    assert on_new_partition > 0, "no event reached the added partition: the campaign did not test it"
    assert phases_hit == set(PHASES), f"phases hit: {sorted(phases_hit)}; kills landed: {dict(landed)}"
