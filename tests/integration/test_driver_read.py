"""At the stream's tip a batch is read on the driver and its append is its only Spark job (issue 25:
the read job before the append was about half of a tip batch's driver time).

Jobs are counted from Spark's status store by each batch's job group, never timed.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from icestream.ingest.positions import TRIM_HORIZON
from icestream.ingest.query import job_group, start_ingest, stop_job_group
from icestream.ingest.reading.driver_read import read_on_driver
from icestream.ingest.reading.record_rows import row_schema
from icestream.ingest.reading.shard_plan import ShardPlan
from icestream.ingest.reading.shard_reader import ReadOptions
from icestream.ingest.reading.task_function import read_arrow
from icestream.kinesis.clients import kinesis_client, kinesis_connection, list_shards
from tests.helpers.spark_jobs import jobs_in_group, last_job_id
from tests.helpers.waiting import wait_until
from tests.reliability.workload import Workload, verify


def test_the_driver_hands_spark_the_rows_a_read_task_would_and_runs_no_job(spark, fresh) -> None:
    made = fresh(shards=2, prefix="tiprows")
    workload = Workload(made, bad_every=3, duplicate_every=4)  # events, malformed records and repeats
    workload.send(40)
    plans = [
        ShardPlan(shard["ShardId"], TRIM_HORIZON, False, None, None)
        for shard in list_shards(kinesis_client(made), made.stream_name)
    ]
    options = ReadOptions(kinesis_connection(made), made.stream_name, archive=True, batch_id=7,
                          ingest_ts=datetime(2026, 11, 26, 9, 30, tzinfo=UTC))  # fmt: skip
    before = last_job_id(spark)
    with ThreadPoolExecutor(2) as pool:
        on_driver, metas = read_on_driver(spark, options, plans, pool)
    assert last_job_id(spark) == before, "making the batch's rows ran a Spark job"

    by_spark = spark.range(len(plans), numPartitions=len(plans)).mapInArrow(read_arrow(options, plans), row_schema())
    expected = by_spark.where("kind != 'meta'").collect()
    assert sorted(on_driver.collect()) == sorted(expected)
    assert {row.kind for row in expected} == {"event", "reject", "raw"}
    shards_read = [json.loads(meta)["shard_id"] for meta, _digests in metas]
    assert shards_read == [plan.shard_id for plan in plans]
    assert sum(json.loads(meta)["read"] for meta, _ in metas) == workload.ledger.records_sent


def test_at_the_tip_each_batch_is_read_on_the_driver_and_runs_one_spark_job(spark, fresh, tmp_path: Path) -> None:
    made = fresh(shards=2, prefix="tip")
    workload = Workload(made, bad_every=0, duplicate_every=5)  # repeats are dropped on the driver, without a job
    progress_file = tmp_path / "progress.jsonl"
    # Positions-only commits of the rejects table come every position_commit_seconds: none in this test.
    query = start_ingest(spark, made, trigger_seconds=0.2, starting_position="trim_horizon",
                         position_commit_seconds=3600, progress_file=progress_file)  # fmt: skip
    try:
        for round_ in range(1, 5):
            workload.send(25)
            wait_until(lambda r=round_: sum(b["written"] for b in query.recent_progress) >= 25 * r
                       or not query.is_active, 120, message=f"round {round_} committed")  # fmt: skip
            assert query.is_active, query.exception()
    finally:
        query.stop()
    query.await_termination()
    assert query.exception() is None, query.exception()
    verdict = verify(spark, made, workload.ledger)
    assert verdict.exact, verdict

    batches = [json.loads(line) for line in progress_file.read_text().splitlines()]
    first, *later = batches
    assert first["read_on"] == "spark", "the first read, of whatever the stream holds, is Spark's"
    at_tip = [batch for batch in later if batch["num_input_rows"]]
    assert at_tip
    assert all(batch["read_on"] == "driver" for batch in at_tip), batches
    jobs = {batch["batch_id"]: jobs_in_group(spark, job_group(batch["id"], batch["batch_id"])) for batch in at_tip}
    assert all(len(ids) == 1 for ids in jobs.values()), f"Spark jobs per batch at the tip: {jobs}"
    # The stop commits the rejects table's positions (it got no rows after the first batch) in a
    # group of its own: in the last batch's group it made that batch look like two jobs.
    assert jobs_in_group(spark, stop_job_group(first["id"])), "the stop's commit ran in its own job group"
