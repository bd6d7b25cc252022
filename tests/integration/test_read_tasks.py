"""A batch's read job: shards grouped into as many tasks as asked, every event still landing once, in
order per key; and a batch bounded over all its shards, whatever the backlog."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from icestream.ingest.query import job_group
from icestream.ingest.reading.spark_job import CLAUSES_UP_TO, session_task_slots, within_ends
from tests.helpers.ingest import drain, table_state
from tests.helpers.streams import event_payload, put

SHARDS = 10  # more than read_job.CLAUSES_UP_TO: the kept rows are found by the shard's number


def read_job_tasks(spark, group: str) -> int:
    """The tasks of a batch's read job: the first job of its group (the read comes before any write)."""
    context = spark.sparkContext
    context._jsc.sc().listenerBus().waitUntilEmpty()
    first = min(context.statusTracker().getJobIdsForGroup(group))
    stages = context.statusTracker().getJobInfo(first).stageIds
    return sum(context.statusTracker().getStageInfo(stage).numTasks for stage in stages)


@pytest.mark.parametrize("per_task", [None, 3, 1], ids=["one-task-per-core", "three-per-task", "one-per-task"])
def test_grouped_shards_are_read_once_each_in_order_per_key(spark, fresh, per_task: int | None) -> None:
    settings = fresh(shards=SHARDS, prefix="grouped")
    counters: Counter = Counter()
    records = []
    for number in range(700):
        user = f"user-{number % 23}"
        counters[user] += 1
        records.append((event_payload(number, user, counter=counters[user]), user))
    put(settings, records)

    query = drain(spark, settings, max_records_per_shard=40, shards_per_task=per_task)

    progress = list(query.recent_progress)
    assert len(progress) >= 2, "a backlog over several batches"
    cores = session_task_slots(spark)  # local[*] on 2 cores: 2, not spark.default.parallelism's 4
    expected = min(SHARDS, cores) if per_task is None else -(-SHARDS // per_task)
    for batch in progress:
        if batch["read_on"] == "spark":
            assert read_job_tasks(spark, job_group(query.id, batch["batch_id"])) == expected
    events, _ = table_state(spark, settings)
    assert len(events) == 700, "nothing lost"
    assert max(events.values()) == 1, "nothing written twice"
    rows = spark.table(settings.table_name).select("user_id", "properties", "ingest_ts", "sequence_number").collect()
    by_user: dict[str, list] = {}
    for row in rows:
        by_user.setdefault(row.user_id, []).append((int(row.properties["n"]), row.ingest_ts, int(row.sequence_number)))
    for user, items in by_user.items():
        items.sort()
        for earlier, later in itertools.pairwise(items):
            # a key's later event is never in an earlier batch, and within a batch it comes further on
            assert earlier[1:] < later[1:], (user, earlier, later)


def test_the_lookup_by_shard_number_keeps_what_one_clause_per_shard_keeps(spark) -> None:
    """Rows of 12 shards (numbers with gaps, as after resharding), sequence numbers of several lengths."""
    shards = [f"shardId-{number:012d}" for number in (0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144)]
    rows = [(shard, str(sequence)) for shard in shards for sequence in (7, 99, 100, 101, 10**20, 10**20 + 1, 10**21)]
    frame = spark.createDataFrame(rows, "shard_id string, sequence_number string")
    ends = {shard: end for shard, end in zip(shards[:-1], ["99", "100", str(10**20), "7", "101"] * 3, strict=False)}
    assert len(ends) > CLAUSES_UP_TO, "the lookup form"
    assert "try_element_at" in within_ends(ends)
    kept = {(row.shard_id, row.sequence_number) for row in frame.where(within_ends(ends)).collect()}
    within = {(shard, sequence) for shard, sequence in rows if shard in ends and int(sequence) <= int(ends[shard])}
    assert kept == within


def test_a_batch_keeps_at_most_its_bound_over_all_shards(spark, fresh) -> None:
    settings = fresh(shards=4, prefix="bounded")
    put(settings, [(event_payload(number, f"u{number % 31}"), f"u{number % 31}") for number in range(800)])

    query = drain(spark, settings, max_records_per_batch=200)

    progress = list(query.recent_progress)
    # 50 records a shard; a task's shards share theirs (one may take what another left): 200 a batch.
    assert all(batch["num_input_rows"] <= 200 for batch in progress), [b["num_input_rows"] for b in progress]
    assert len(progress) >= 4
    heaps = [batch["driver_heap_mib"] for batch in progress]  # what icestream ingest prints per batch
    assert all(0 < heap["used"] <= heap["committed"] <= heap["max"] for heap in heaps), heaps
    events, _ = table_state(spark, settings)
    assert (len(events), max(events.values())) == (800, 1), "every event once"
