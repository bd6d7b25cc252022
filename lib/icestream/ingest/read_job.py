"""A batch's read job: the shards' plans spread over a bounded number of tasks, the rows kept.

One Spark job reads every shard of a batch (:func:`~icestream.ingest.reader.read_arrow` in each
task), keeps the rows in Spark's block store and collects one small meta row per shard. A task
reads its shards one after another, each within Kinesis's per-shard limits (its own GetRecords
loop), through the one client its Python worker keeps: a stream of 128 shards is read by
``spark.default.parallelism`` tasks (a local session's 4), not by 128 tasks each paying a task's
fixed cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from icestream.ingest.reader import ReadOptions, read_arrow, row_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from icestream.ingest.positions import ShardPlan


def read_task_count(shards: int, shards_per_task: int | None, cores: int) -> int:
    """How many tasks a batch's read job runs for ``shards`` shard plans.

    Args:
        shards: The batch's shard plans.
        shards_per_task: The group's size (Databricks' ``shardsPerTask``); None: ``cores`` tasks, the
            shards spread evenly (more tasks than cores would only queue, each with a task's cost).
        cores: The session's ``spark.default.parallelism`` (a local session's 4, a cluster's cores).

    Returns:
        At least 1, at most ``shards`` (when there are any).
    """
    if shards <= 0:
        return 1
    if shards_per_task is not None:
        return -(-shards // shards_per_task)
    return max(1, min(shards, cores))


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
    read_rows = ids.mapInArrow(read_arrow(options, tuple(plans)), row_schema())
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


def release_rows(rows: DataFrame) -> None:
    """Free the blocks of a batch's rows kept by ``localCheckpoint``.

    They are not a cache: ``DataFrame.unpersist`` does not reach them, and Spark's context cleaner
    would only once the JVM collects the plan, long after the batch.
    """
    rows._jdf.queryExecution().logical().rdd().unpersist(False)
