"""What Spark jobs a session ran, read from its status store once the listener bus delivered every event."""

from __future__ import annotations

from typing import Any


def last_job_id(spark: Any) -> int:
    """The id of the newest job the session's context started, whatever its job group (-1: none yet).

    Job ids grow by one per job, so two looks tell whether any job ran between them. The status
    store hears of jobs through Spark's asynchronous listener bus: it is drained first.
    """
    context = spark.sparkContext._jsc.sc()
    context.listenerBus().waitUntilEmpty()
    jobs = context.statusStore().jobsList(None)  # every status, sorted by job id
    return jobs.last().jobId() if jobs.size() else -1


def jobs_in_group(spark: Any, group: str) -> list[int]:
    """The ids of the jobs of one job group (``SparkContext.setJobGroup``), the listener bus drained first."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    return sorted(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
