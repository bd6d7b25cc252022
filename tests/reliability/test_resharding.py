"""Resharding campaign: splits and merges while the ingest runs under load.

Builds on the single split-then-merge test in ``tests/integration/test_ingest.py``: here several
operations, chosen at random among the open shards, happen while a producer keeps sending, and
the check is the same ledger comparison as the crash campaign plus order per partition key.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from icestream.ingest.query import start_ingest
from icestream.kinesis.clients import kinesis_client, list_shards
from tests.reliability import figures
from tests.reliability.figures import size
from tests.reliability.workload import Workload, drain_and_verify


def _open_shards(client, stream: str) -> list[dict]:
    shards = [s for s in list_shards(client, stream) if "EndingSequenceNumber" not in s["SequenceNumberRange"]]
    return sorted(shards, key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))


def _reshard(client, stream: str, rng: random.Random) -> str:
    """Split a random open shard in the middle, or merge two adjacent open shards; name what was done."""
    shards = _open_shards(client, stream)
    if len(shards) >= 2 and (len(shards) >= 4 or rng.random() < 0.5):
        index = rng.randrange(len(shards) - 1)
        first, second = shards[index], shards[index + 1]
        client.merge_shards(StreamName=stream, ShardToMerge=first["ShardId"], AdjacentShardToMerge=second["ShardId"])
        return "merge"
    shard = rng.choice(shards)
    low, high = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
    client.split_shard(StreamName=stream, ShardToSplit=shard["ShardId"], NewStartingHashKey=str((low + high) // 2))
    return "split"


def test_splits_and_merges_under_load_keep_order_and_exactly_once(spark, fresh, tmp_path: Path) -> None:
    settings = fresh(shards=2, prefix="reshard")
    client = kinesis_client(settings)
    seed = int(os.environ.get("RELIABILITY_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    workload = Workload(settings, keys=24).start(per_call=15, interval=0.3)
    query = start_ingest(spark, settings, trigger_seconds=0.5, max_records_per_shard=40,
                         progress_file=tmp_path / "p.jsonl")  # fmt: skip
    done: list[str] = []
    try:
        # The sleeps are the campaign's pacing, not waits for anything: reshard at random moments
        # under load, and keep sending for a while after the last one, so its children get records.
        for _ in range(size(3, 10)):
            time.sleep(rng.uniform(1.0, 4.0))
            done.append(_reshard(client, settings.stream_name, rng))
            assert query.exception() is None, query.exception()
        time.sleep(2.0)
    finally:
        workload.stop()
    query.stop()
    assert query.await_termination(timeout=120), "the ingest did not stop"
    verdict = drain_and_verify(spark, settings, workload.ledger, tmp_path / "p.jsonl", timeout=300)
    shards_read = spark.table(settings.table_name).select("shard_id").distinct().count()
    figures.record(
        "resharding", f"seed {seed}", splits=done.count("split"), merges=done.count("merge"),
        shards=len(list_shards(client, settings.stream_name)), shards_read=shards_read, events=verdict.events,
        lost=verdict.lost, duplicated=verdict.duplicated, rejects_lost=verdict.rejects_lost,
        order_violations=verdict.order_violations,
    )  # fmt: skip
    assert verdict.exact, verdict
    assert shards_read > 2, "children of the resharding were read"
