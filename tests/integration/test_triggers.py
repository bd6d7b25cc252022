"""min_records holds batches back until enough records wait, against the emulator (issue 25, item 2).

Triggers are counted (ListShards and GetRecords calls through a counting proxy), never timed: fewer
records than ``min_records`` leave the table without a snapshot across several triggers, the rest
make one batch commit all of them, and a stop while records are held back loses none.
"""

from __future__ import annotations

from icestream.config import load_settings
from icestream.ingest.query import start_ingest
from icestream.lake.table import LakeTable
from icestream.queries import report
from tests.helpers.spark_jobs import last_job_id
from tests.helpers.waiting import wait_until
from tests.reliability.faultproxy import FaultProxy
from tests.reliability.workload import Workload, verify

MIN_RECORDS = 30
LONG_DELAY = 3600.0  # never reached here: only min_records decides


def test_min_records_holds_batches_back_and_one_batch_commits_them_all(spark, fresh, emulator: str) -> None:
    made = fresh(shards=2, prefix="minrec")
    events, rejects = LakeTable(spark, made.table_name), LakeTable(spark, made.rejects_table_name)
    workload = Workload(made, bad_every=0, duplicate_every=0)  # one Kinesis record per event: exact counts
    with FaultProxy(emulator, operations=()) as proxy:  # forwards everything, counts each operation
        via_proxy = load_settings(kinesis_endpoint=proxy.endpoint, stream_name=made.stream_name, table=made.table)
        query = start_ingest(spark, via_proxy, trigger_seconds=0.2, starting_position="trim_horizon",
                             min_records=MIN_RECORDS, max_trigger_delay_seconds=LONG_DELAY)  # fmt: skip
        try:
            # The first trigger reads (an empty stream); from then on triggers ask Kinesis first.
            wait_until(lambda: proxy.requests["ListShards"] >= 3, 120, message="the first triggers")
            jobs = last_job_id(spark)

            workload.send(MIN_RECORDS - 10)
            calls = proxy.requests["GetRecords"]
            wait_until(lambda: proxy.requests["GetRecords"] >= calls + 10, 120, message="five triggers after the send")
            assert query.is_active, query.exception()
            assert last_job_id(spark) == jobs, "a trigger below min_records ran a Spark job"
            assert list(query.recent_progress) == []
            assert events.inspect.snapshots().empty, "no commit while fewer than min_records wait"

            workload.send(10)
            wait_until(lambda: len(query.recent_progress) >= 1, 120, message="the batch of min_records")
            (batch,) = query.recent_progress
            assert (batch["num_input_rows"], batch["written"]) == (MIN_RECORDS, MIN_RECORDS)

            # Held back again, then stopped: the records wait, uncommitted, in Kinesis.
            workload.send(5)
            calls = proxy.requests["GetRecords"]
            wait_until(lambda: proxy.requests["GetRecords"] >= calls + 4, 120, message="two triggers after the send")
        finally:
            query.stop()
        query.await_termination()
    assert len(query.recent_progress) == 1, "the 5 records were held back until the stop"

    # AvailableNow ignores min_records: a scheduled run drains what is there.
    drain = start_ingest(spark, made, available_now=True, min_records=MIN_RECORDS)
    drain.await_termination()
    assert [batch["written"] for batch in drain.recent_progress] == [5]
    verdict = verify(spark, made, workload.ledger)
    assert verdict.exact, verdict

    lag = report.batch_freshness(events)
    assert "summary['icestream.first-arrival-ms']" in str(events.last_statement), "the SQL that ran is shown"
    assert list(lag["added_records"]) == [MIN_RECORDS, 5]
    assert list(lag["batch_id"]) == [0, 1]
    first = lag.iloc[0]
    # Its oldest records arrived a send (and five triggers) before its newest, and both before the commit.
    assert first["freshness_oldest_s"] > first["freshness_newest_s"] >= 0
    assert lag["freshness_newest_s"].notna().all()
    # The rejects table got no rows, only its positions: a commit that carries no arrivals.
    position_only = report.batch_freshness(rejects)
    assert len(position_only) >= 1
    assert position_only["added_records"].fillna(0).eq(0).all()
    assert position_only["freshness_oldest_s"].isna().all()


def test_a_drain_runs_its_batches_back_to_back_whatever_the_trigger(spark, fresh) -> None:
    """A drain of three batches' worth never waits for a trigger between them (the CLI's default 5 s
    trigger made a scheduled drain of a backlog idle 5 s after every batch)."""
    import threading

    from icestream.ingest.options import ingest_options
    from icestream.ingest.query import build_ingest
    from tests.helpers.streams import event_payload, put

    made = fresh(shards=1, prefix="backtoback")
    put(made, [(event_payload(number, "u"), "u") for number in range(30)])
    options = ingest_options(made, available_now=True, trigger_seconds=10, max_records_per_shard=10).validated()
    query = build_ingest(spark, made, options)
    waits: list[float | None] = []

    class Recorded(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout)
            return super().wait(timeout)

    query._stop = Recorded()
    query.start()
    assert query.await_termination(timeout=300)
    assert [progress["num_input_rows"] for progress in query.recent_progress] == [10, 10, 10]
    assert waits == [], "a drain waited for its trigger between batches"
