"""How many tasks a batch's read job runs: spark.default.parallelism by default, or groups of ``shards_per_task``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icestream.errors import ConfigError
from icestream.ingest.options import IngestOptions
from icestream.ingest.reading.spark_job import CLAUSES_UP_TO, read_task_count, shard_share, task_slots, within_ends


@pytest.mark.parametrize(
    ("shards", "per_task", "cores", "tasks"),
    [
        (4, None, 2, 2),  # the default: one task per core (spark.default.parallelism)
        (1, None, 8, 1),  # never more tasks than shards
        (128, None, 2, 2),
        (128, None, 16, 16),
        (128, 5, 2, 26),  # Databricks' default group: ceil(128 / 5)
        (4, 1, 2, 4),  # one task per shard, as the ingest read before grouping
        (7, 3, 2, 3),
        (0, None, 2, 1),  # no plans: the job is never run, but a range needs a partition
    ],
)
def test_read_task_count(shards: int, per_task: int | None, cores: int, tasks: int) -> None:
    assert read_task_count(shards, per_task, cores) == tasks


@given(st.integers(1, 2_000), st.one_of(st.none(), st.integers(1, 600)), st.integers(1, 512))
def test_every_shard_is_in_a_task_and_no_task_is_empty(shards: int, per_task: int | None, cores: int) -> None:
    tasks = read_task_count(shards, per_task, cores)
    assert 1 <= tasks <= shards
    # spark.range(shards, numPartitions=tasks) puts shards // tasks or one more ids in each partition
    assert shards // tasks >= 1
    if per_task is not None:
        assert -(-shards // tasks) <= per_task


@pytest.mark.parametrize("value", [0, -3])
def test_shards_per_task_must_be_positive(value: int) -> None:
    with pytest.raises(ConfigError, match="shards_per_task"):
        IngestOptions(shards_per_task=value).validated()


def test_few_shards_get_a_clause_each_and_many_a_lookup_by_number() -> None:
    few = {f"shardId-{n:012d}": "1001" for n in range(CLAUSES_UP_TO)}
    assert within_ends(few).count("shard_id = ") == CLAUSES_UP_TO
    many = {"shardId-000000000000": "5", "shardId-000000000003": "1001"}
    many |= {f"shardId-{n:012d}": "9" for n in range(5, 12)}
    predicate = within_ends(many)
    assert "shard_id = " not in predicate
    assert "try_element_at(array('5', NULL, NULL, '1001', NULL, '9', " in predicate
    # a shard numbered past the lookup's reach falls back to clauses
    assert "shard_id = 'shardId-000000200000'" in within_ends({**many, "shardId-000000200000": "1"})
    assert within_ends({}) == "false"


def test_an_end_that_is_not_a_sequence_number_never_reaches_sql() -> None:
    with pytest.raises(ValueError, match="not a sequence number"):
        within_ends({"shardId-000000000000": "1' OR '1'='1"})


@pytest.mark.parametrize(
    ("per_shard", "per_batch", "shards", "share"),
    [
        (100_000, 250_000, 4, 62_500),  # the defaults on 4 shards: the batch bound decides
        (100_000, 250_000, 2, 100_000),  # on 2, the per-shard bound
        (100_000, 250_000, 128, 1_953),
        (100_000, 250_000, 500_000, 1),  # never nothing
        (40, 1_000, 4, 40),
        (100_000, 10, 0, 10),  # no shards: no division by zero
    ],
)
def test_each_shard_gets_a_share_of_the_batch(per_shard: int, per_batch: int, shards: int, share: int) -> None:
    assert shard_share(per_shard, per_batch, shards) == share


def test_max_records_per_batch_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="max_records_per_batch"):
        IngestOptions(max_records_per_batch=0).validated()


@pytest.mark.parametrize(
    ("master", "parallelism", "slots"),
    [
        ("local[*]", 4, 2),  # the machine's 2 cores, not a local session's spark.default.parallelism of 4
        ("local[3]", 4, 3),
        ("local[2,4]", 4, 2),  # with task retries
        ("local", 4, 1),
        ("spark://127.0.0.1:7077", 6, 6),  # a cluster: its executors' cores
        ("local-cluster[2,1,1024]", 2, 2),
    ],
)
def test_task_slots_are_the_tasks_a_session_runs_at_once(master: str, parallelism: int, slots: int) -> None:
    assert task_slots(master, parallelism, machine_cores=2) == slots
