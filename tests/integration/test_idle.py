"""An always-on ingest of a caught-up stream runs no Spark job until records arrive (issue 25: an idle
ingest used to run a read job every trigger, most of a core of this machine)."""

from __future__ import annotations

from icestream.config import load_settings
from icestream.ingest.query import start_ingest
from tests.helpers.spark_jobs import last_job_id
from tests.helpers.waiting import wait_until
from tests.reliability.faultproxy import FaultProxy
from tests.reliability.workload import Workload, verify


def test_a_caught_up_ingest_asks_kinesis_from_the_driver_and_reads_when_records_arrive(
    spark, fresh, emulator: str
) -> None:
    made = fresh(shards=2, prefix="idle")
    with FaultProxy(emulator, operations=()) as proxy:  # forwards everything, counts each operation
        via_proxy = load_settings(kinesis_endpoint=proxy.endpoint, stream_name=made.stream_name, table=made.table)
        query = start_ingest(spark, via_proxy, trigger_seconds=0.2, starting_position="trim_horizon")
        try:
            # The first trigger reads (a job); from then on every trigger only asks Kinesis.
            wait_until(lambda: proxy.requests["ListShards"] >= 3, 120, message="the first triggers")
            jobs = last_job_id(spark)
            calls = proxy.requests["GetRecords"]
            wait_until(lambda: proxy.requests["GetRecords"] >= calls + 10, 120, message="five quiet triggers")
            assert last_job_id(spark) == jobs, "a quiet trigger ran a Spark job"
            assert query.is_active, query.exception()

            workload = Workload(made)
            workload.send(40)
            wait_until(lambda: sum(b["num_input_rows"] for b in query.recent_progress) >= 40, 120,
                       message="the records that arrived")  # fmt: skip
        finally:
            query.stop()
        query.await_termination()
    verdict = verify(spark, made, workload.ledger)
    assert verdict.exact, verdict
