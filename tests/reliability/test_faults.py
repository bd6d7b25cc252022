"""Fault campaign: throttling, expired iterators, connection resets, timeouts, 5xx answers,
an emulator restart, and commit conflicts with a concurrent compaction.

Endpoint faults come from :class:`~tests.reliability.faultproxy.FaultProxy` on loopback, so they
reach the real path (botocore in the driver and in each Spark read task). Each case sends a known
workload straight to the emulator, drains it through the proxy, and compares the tables with it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from icestream.config import load_settings
from icestream.errors import IcestreamError
from icestream.ingest.positions import TRIM_HORIZON
from icestream.ingest.query import start_ingest
from icestream.ingest.reading.shard_plan import ShardPlan
from icestream.ingest.reading.shard_reader import ReadOptions, read_shard
from icestream.kinesis.clients import KinesisConnection, ensure_stream
from icestream.kinesis.emulator import Emulator, free_port
from icestream.lake.table import setup_tables
from tests.helpers.waiting import wait_until
from tests.reliability import figures
from tests.reliability.faultproxy import FaultProxy
from tests.reliability.figures import size
from tests.reliability.workload import Workload, drain_and_verify, verify

# fault -> (operations it hits, every n-th request, budget bounded, budget full)
CASES = {
    "throttle": (("GetRecords", "GetShardIterator", "ListShards"), 2, 6, 30),
    "expired_iterator": (("GetRecords",), 2, 6, 30),
    "connection_reset": (("GetRecords", "GetShardIterator", "ListShards"), 3, 6, 30),
    "server_error": (("GetRecords", "GetShardIterator", "ListShards"), 2, 6, 30),
}


def _sum_shards(progress: list[dict[str, Any]], key: str) -> int:
    return sum(shard[key] for batch in progress for shard in batch["shards"].values())


@pytest.mark.parametrize("fault", list(CASES))
def test_endpoint_fault_is_ridden_out(spark, fresh, emulator: str, tmp_path: Path, fault: str) -> None:
    settings = fresh(shards=2, prefix="fault")
    workload = Workload(settings)
    workload.send(size(150, 600))
    operations, every, bounded, full = CASES[fault]
    with FaultProxy(emulator, fault, every=every, budget=size(bounded, full), operations=operations) as proxy:
        via_proxy = load_settings(kinesis_endpoint=proxy.endpoint, stream_name=settings.stream_name,
                                  table=settings.table)  # fmt: skip
        query = start_ingest(spark, via_proxy, available_now=True, trigger_seconds=0, max_records_per_shard=60,
                             progress_file=tmp_path / "p.jsonl")  # fmt: skip
        error, terminated = None, False
        try:
            terminated = query.await_termination(timeout=600)
        except IcestreamError as failure:
            error = failure
    verdict = verify(spark, settings, workload.ledger)
    progress = list(query.recent_progress)
    injected = sum(proxy.injected.values())
    figures.record(
        "faults", fault, injected=injected, recovered=injected if error is None and verdict.exact else 0,
        lost=verdict.lost + verdict.rejects_lost, duplicated=verdict.duplicated + verdict.rejects_duplicated,
        reader_retries=_sum_shards(progress, "retried"), iterator_renewals=_sum_shards(progress, "iterator_renewals"),
        error=type(error).__name__ if error else "-",
    )  # fmt: skip
    assert error is None, error
    assert terminated, "the drain did not end within 600 s: a hung query, not lost records"
    assert injected >= 1, proxy.requests  # the drain may finish before the whole budget is spent
    assert verdict.exact, verdict
    if fault == "expired_iterator":
        assert _sum_shards(progress, "iterator_renewals") >= 1
    if fault == "throttle":
        assert _sum_shards(progress, "throttled") >= 1


def test_read_timeouts_are_retried_within_the_shard_task(emulator: str, stream_settings) -> None:
    """Timeouts at the boto3 layer: a client with a 1 s read timeout, stalled answers from the proxy.

    (The ingest's own read clients wait 30 s for an answer, so whole-query timeouts would make this
    campaign minutes long; the code path after botocore's ReadTimeoutError is the same.)
    """
    ensure_stream(stream_settings, shard_count=1)
    workload = Workload(stream_settings, bad_every=0, duplicate_every=0)
    workload.send(size(80, 300))
    budget = size(3, 6)
    with FaultProxy(emulator, "timeout", every=1, budget=budget, stall_seconds=2.0) as proxy:
        connection = KinesisConnection("local", stream_settings.region, proxy.endpoint)
        options = ReadOptions(connection=connection, stream_name=stream_settings.stream_name, max_records=100_000,
                              min_call_interval=0.0)  # fmt: skip
        plan = ShardPlan("shardId-000000000000", TRIM_HORIZON, False, None, None)
        client = connection.client(connect_timeout=1, read_timeout=1, max_attempts=1)
        rows = list(read_shard(plan, options, client=client))
    events = {row[5] for row in rows if row[0] == "event"}
    meta = rows[-1]
    injected = sum(proxy.injected.values())
    lost = len(set(workload.ledger.good) - events)
    stats = json.loads(meta[-1])
    figures.record("faults", "read_timeout (boto3 layer)", injected=injected, recovered=injected if not lost else 0,
                   lost=lost, duplicated=0, reader_retries=stats["retried"])  # fmt: skip
    assert injected == budget
    assert lost == 0


def test_emulator_restart_fails_clearly_then_recovers(spark, tmp_path: Path) -> None:
    """The endpoint dies mid-stream: one clear error, not a hang; after the restart the ingest resumes.

    moto keeps everything in memory, so a restarted emulator has no streams: the stream is created
    again (same name, same shard ids, sequence numbers starting over) and its records are new.
    """
    server = Emulator(tmp_path / "emulator")
    port = free_port()
    settings = load_settings(kinesis_endpoint=server.start(port=port), stream_name="restart-stream",
                             table=f"restart_{port}")  # fmt: skip
    try:
        ensure_stream(settings, shard_count=2)
        setup_tables(spark, settings)
        before = Workload(settings)
        before.send(120)
        query = start_ingest(spark, settings, trigger_seconds=0.5, progress_file=tmp_path / "p.jsonl")

        def all_ingested() -> bool:
            assert query.exception() is None, query.exception()
            return verify(spark, settings, before.ledger).lost == 0

        wait_until(all_ingested, timeout=180, interval=1, message="the 120 events sent before the restart")
        server.stop()
        went_down = time.monotonic()
        with pytest.raises(IcestreamError) as failure:
            query.await_termination(timeout=300)
        seconds_to_error = time.monotonic() - went_down
        assert not query.is_active, "the query hung instead of failing"

        server.start(port=port)
        ensure_stream(settings, shard_count=2)
        after = Workload(settings)
        after.counters = before.counters.copy()  # keys keep counting up: order per key spans the restart
        after._prefix = "after-restart"
        after.send(120)
        resumed = start_ingest(spark, settings, available_now=True, trigger_seconds=0, progress_file=tmp_path / "q")
        assert resumed.await_termination(timeout=300), "the drain after the restart did not end"
        verdict_before = verify(spark, settings, before.ledger)
        verdict_after = verify(spark, settings, after.ledger)
    finally:
        server.stop()
    figures.record(
        "faults", "emulator_restart", injected=1, recovered=int(verdict_after.lost == 0), lost=verdict_after.lost,
        duplicated=verdict_before.duplicated, error=type(failure.value).__name__,
        seconds_to_error=round(seconds_to_error, 1),
    )  # fmt: skip
    message = str(failure.value)
    assert "127.0.0.1" in message or "endpoint" in message.lower(), message
    assert verdict_before.lost == 0, verdict_before
    assert verdict_before.duplicated == 0, verdict_before
    assert verdict_after.lost == 0, (
        f"{verdict_after.lost} records of the recreated stream were skipped: the table's positions "
        f"(AFTER:<old sequence number>) were applied to a new stream; e.g. {verdict_after.missing_ids[:3]}"
    )


def test_commits_conflict_with_a_concurrent_compaction(spark, fresh, tmp_path: Path) -> None:
    settings = fresh(shards=2, prefix="conflict")
    workload = Workload(settings).start(per_call=15, interval=0.3)
    query = start_ingest(spark, settings, trigger_seconds=0.3, max_records_per_shard=50,
                         progress_file=tmp_path / "p.jsonl")  # fmt: skip
    compactions, failures = 0, []
    rounds = size(4, 16)
    try:  # compaction runs in this thread while the ingest commits from its own
        for number in range(rounds):
            table = settings.table if number % 2 == 0 else f"{settings.table}_rejects"
            try:
                spark.sql(
                    f"CALL lake.system.rewrite_data_files(table => '{settings.namespace}.{table}', "
                    "options => map('rewrite-all', 'true'))"
                ).collect()
                compactions += 1
            except Exception as error:  # noqa: BLE001 - a failed compaction is a figure, not a test failure
                failures.append(type(error).__name__)
            assert query.exception() is None, query.exception()
            time.sleep(0.5)  # pacing: compactions spread over the ingest's commits, not a wait for anything
    finally:
        workload.stop()
    query.stop()
    assert query.await_termination(timeout=120), "the ingest did not stop"
    verdict = drain_and_verify(spark, settings, workload.ledger, tmp_path / "p.jsonl", timeout=300)
    replaces = spark.sql(f"SELECT count(*) FROM {settings.table_name}.snapshots WHERE operation = 'replace'").first()[0]
    figures.record(
        "faults", "commit_conflict (compaction)", injected=rounds, recovered=compactions,
        lost=verdict.lost + verdict.rejects_lost, duplicated=verdict.duplicated + verdict.rejects_duplicated,
        compaction_failures=len(failures), ingest_batches=len(query.recent_progress), events_replaces=replaces,
    )  # fmt: skip
    assert verdict.exact, verdict
    assert compactions >= 1, failures
