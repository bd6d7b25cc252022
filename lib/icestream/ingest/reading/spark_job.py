"""A batch's read job: the shards' plans spread over a bounded number of tasks, the rows kept.

One Spark job reads every shard of a batch (:func:`~icestream.ingest.reading.task_function.read_arrow` in each
task), keeps the rows in Spark's block store and collects one small meta row per shard. A task
reads its shards side by side (:mod:`~icestream.ingest.reading.threads`: a thread per shard, a few at
once), each within Kinesis's per-shard limits (its own GetRecords loop), through the one client its
Python worker keeps: a stream of 128 shards is read by as many tasks as the session runs at once
(:func:`task_slots`: a local session's cores), not by 128 tasks each paying a task's fixed cost.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from icestream.ingest.reading.record_rows import row_schema
from icestream.ingest.reading.shard_reader import ReadOptions
from icestream.ingest.reading.task_function import read_arrow
from icestream.runtime.arrow_frames import map_in_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from icestream.ingest.reading.shard_plan import ShardPlan


def read_task_count(shards: int, shards_per_task: int | None, cores: int) -> int:
    """How many tasks a batch's read job runs for ``shards`` shard plans.

    Args:
        shards: The batch's shard plans.
        shards_per_task: The group's size (Databricks' ``shardsPerTask``); None: ``cores`` tasks, the
            shards spread evenly (more tasks than cores would only queue, each with a task's cost).
        cores: The tasks the session runs at once (:func:`task_slots`).

    Returns:
        At least 1, at most ``shards`` (when there are any).
    """
    if shards <= 0:
        return 1
    if shards_per_task is not None:
        return -(-shards // shards_per_task)
    return max(1, min(shards, cores))


def task_slots(master: str, parallelism: int, machine_cores: int | None = None) -> int:
    """How many tasks a session runs at once: N of ``local[N]`` (the machine's cores for ``local[*]``),
    else ``spark.default.parallelism`` (on a cluster, its executors' cores).

    A local session's ``spark.default.parallelism`` is 4 whatever the machine (runtime.spark), so it
    cannot say how many tasks run side by side: on 2 cores, 4 read tasks ran as two rounds of two.
    """
    found = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master.strip())
    if found is None:
        return max(1, parallelism)
    if found.group(1) is None:
        return 1
    if found.group(1) == "*":
        return max(1, machine_cores or os.cpu_count() or 1)
    return max(1, int(found.group(1)))


def session_task_slots(spark: SparkSession) -> int:
    """:func:`task_slots` of a running session; ``local[*]``'s cores as its JVM counts them (what Spark
    itself runs), which follows a container's CPU limit where Python's ``os.cpu_count`` may not."""
    from icestream.runtime.handles import jvm

    context = spark.sparkContext
    master = context.master or ""
    cores = jvm(spark).java.lang.Runtime.getRuntime().availableProcessors() if "[*" in master else None
    return task_slots(master, context.defaultParallelism, cores)


def shard_share(per_shard: int, per_batch: int, shards: int) -> int:
    """Records each of ``shards`` shards may give a batch: ``per_batch`` shared evenly, at most ``per_shard``
    and at least 1 (a shard that fills its share leaves the rest to the next batch)."""
    return max(1, min(per_shard, per_batch // max(shards, 1)))


def read_with_spark(
    spark: SparkSession,
    options: ReadOptions,
    plans: Sequence[ShardPlan],
    tasks: int,
    explain_failure: Callable[[BaseException], None],
) -> tuple[DataFrame, list[tuple[str, bytes]]]:
    """Read ``plans`` in one Spark job of ``tasks`` tasks and keep the rows.

    Args:
        spark: The session.
        options: What every read task needs.
        plans: One per shard.
        tasks: From :func:`read_task_count`.
        explain_failure: Called with a failure of the job before it is raised (an executor without
            icestream gets one clear line instead of the worker's traceback).

    Returns:
        The kept rows, and every meta row's ``(meta, digests)``.
    """
    # range spreads the plans' ids evenly over the tasks, in order: each task reads its shards in turn.
    ids = spark.range(len(plans), numPartitions=tasks)
    read_rows = map_in_arrow(ids, read_arrow(options, tuple(plans)), row_schema())  # no pandas on the driver
    # Kept as they are read, not in Spark's columnar cache (see source.ReadBatch.rows); lazily, so the
    # one job that collects the meta rows also reads and keeps every row.
    rows = read_rows.localCheckpoint(eager=False)
    try:
        collected = rows.where("kind = 'meta'").select("meta", "raw_data").collect()
    except BaseException as error:
        release_rows(rows)
        explain_failure(error)
        raise
    return rows, [(row.meta, bytes(row.raw_data or b"")) for row in collected]


# Up to this many shards the kept rows' predicate is one clause per shard; beyond, each row looks its
# shard's end up by the shard's number, in constant time (measured on 200,000 kept rows, warm: 4
# clauses 0.11 s against 0.25 s for the lookup; 128 clauses 0.31-0.38 s against 0.21-0.25 s).
CLAUSES_UP_TO = 8
LOOKUP_UP_TO_INDEX = 100_000  # shard numbers grow with every split and merge; an array this long at most


def sequence_at_most(column: str, last: str) -> str:
    """A SQL predicate: sequence-number string ``column`` <= ``last`` (a literal or an expression) in
    numeric order.

    Digits are one byte each, so the byte length (``octet_length``, stored with the string) is the
    number's length: ``length`` would count characters by walking every row's bytes.
    """
    size = f"octet_length({last})" if not last.startswith("'") else str(len(last) - 2)
    return f"(octet_length({column}) < {size} OR (octet_length({column}) = {size} AND {column} <= {last}))"


def within_ends(ends: Mapping[str, str]) -> str:
    """A SQL predicate on the kept rows: ``sequence_number`` at most its shard's end in ``ends``.

    Args:
        ends: Shard id (``shardId-`` or ``partition-`` and 12 digits, checked by the caller) -> the
            last sequence number (or Kafka offset) its read reported.

    Returns:
        ``false`` without ends; else one clause per shard, or, for many shards, the shard's end
        looked up by its number (``try_element_at``: a row of a shard without an end is NULL, so out).
    """
    for last in ends.values():
        if not last.isdigit() or not last.isascii():
            raise ValueError(f"not a sequence number: {last!r}")
    if not ends:
        return "false"
    numbers = {int(shard.rsplit("-", 1)[1]): last for shard, last in ends.items()}
    if len(ends) <= CLAUSES_UP_TO or max(numbers) > LOOKUP_UP_TO_INDEX:
        clauses = [
            f"(shard_id = '{shard}' AND {sequence_at_most('sequence_number', repr(last))})"
            for shard, last in ends.items()
        ]
        return " OR ".join(clauses)
    items = ", ".join(f"'{numbers[index]}'" if index in numbers else "NULL" for index in range(max(numbers) + 1))
    last = f"try_element_at(array({items}), CAST(substring_index(shard_id, '-', -1) AS INT) + 1)"
    return sequence_at_most("sequence_number", last)


def release_rows(rows: DataFrame) -> None:
    """Free the blocks of a batch's rows kept by ``localCheckpoint``.

    They are not a cache: ``DataFrame.unpersist`` does not reach them, and Spark's context cleaner
    would only once the JVM collects the plan, long after the batch.
    """
    rows._jdf.queryExecution().logical().rdd().unpersist(False)
