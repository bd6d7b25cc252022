"""SIGKILL what users run instead of icestream, once each in the middle of a commit, and count the table's rows.

icestream's own ingest on Kafka has its campaign (``test_crash_kafka.py``). Its two peers here, on the
session's broker, each fed by the campaign's producer (``Workload``: good events only, since one record
Iceberg's sink cannot convert stops its task, ``tests/integration/test_kafka_connect.py``):

- **Kafka Connect with Iceberg's sink** (``icestream.kafka.connect_worker``): killed right after its
  coordinator logs "initiated commit" (the tasks are writing their files; the table commit is to
  come), restarted, left to catch up; then stopped, its offsets deleted (the sink's consumer group,
  where Connect keeps a sink's offsets, and the control topic's groups), restarted again.
- **Spark's plain Kafka → Iceberg job** (``icestream.jobs.kafka_to_iceberg``): killed just after a
  batch's table commit (its offsets logged in the checkpoint, the catalog naming its new metadata,
  its commit log not yet), restarted on the same checkpoint with ``availableNow``; then run again on a
  new checkpoint.

Asserted is what each promises: nothing lost after a kill, and for Spark nothing duplicated with its
checkpoint kept (Iceberg's sink skips an epoch the table holds for the query). What a lost checkpoint
or lost offsets do is recorded (the reliability figures; docs/performance.md), not asserted.

Only under ``make reliability`` (about 3 minutes): these measure the peers, not icestream, whose own
Kafka campaign runs in ``make test``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icestream.kafka.connect_worker import COMMIT_FINISHED, COMMIT_STARTED, ConnectWorker, sink_spec
from icestream.kafka.connection import kafka_connection
from icestream.kafka.topics import offsets
from icestream.runtime.catalog import current_metadata_location
from tests.helpers.topics import delete_groups, group_offsets
from tests.helpers.waiting import wait_until
from tests.reliability import figures
from tests.reliability.figures import FULL
from tests.reliability.workload import Workload, losses

pytestmark = pytest.mark.skipif(not FULL, reason="make reliability: this kill drill measures the peers")

COMMIT_INTERVAL_MS = 2000
CATCH_UP_SECONDS = 240.0  # bounds on a loaded 2-core machine, not measurements
JOB_SECONDS = 300.0
GROUP_SECONDS = 120.0  # the killed worker's members leave at the broker's session timeout (45 s)


def table_event_ids(spark, name: str) -> list[str]:
    spark.catalog.refreshTable(name)
    return [row.event_id for row in spark.table(name).select("event_id").collect()]


def log_lines(log: Path, mark: str) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines() if mark in line]


def connect_caught_up(worker: ConnectWorker, connection, spec) -> None:
    """Wait until the sink's group has committed the topic's end, then for two more completed commits."""
    ends = {part: found.high for part, found in offsets(connection).items()}
    wait_until(lambda: group_offsets(connection, spec.consumer_group) == ends, CATCH_UP_SECONDS, interval=0.5,
               message="the sink's offsets at the topic's end")  # fmt: skip
    seen = len(log_lines(worker.log, COMMIT_FINISHED))
    wait_until(lambda: len(log_lines(worker.log, COMMIT_FINISHED)) >= seen + 2, CATCH_UP_SECONDS, interval=0.5)


def test_kafka_connects_sink_killed_mid_commit_loses_nothing(spark, kafka_fresh) -> None:
    settings = kafka_fresh(partitions=2, prefix="kcpeer")
    connection = kafka_connection(settings)
    spec = sink_spec(settings, partition_count=2, commit_interval_ms=COMMIT_INTERVAL_MS)
    worker = ConnectWorker.from_settings(settings)
    workload = Workload(settings, to="kafka", bad_every=0, duplicate_every=0)
    worker.start(settings, connection, spec)
    try:
        workload.start(per_call=20, interval=0.2)  # about 100 events/s
        wait_until(lambda: len(table_event_ids(spark, settings.table_name)) > 0, CATCH_UP_SECONDS, interval=1.0)
        started = len(log_lines(worker.log, COMMIT_STARTED))
        wait_until(lambda: len(log_lines(worker.log, COMMIT_STARTED)) > started, CATCH_UP_SECONDS, interval=0.02)
        pid = worker.pid()
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)
        commit_id = log_lines(worker.log, COMMIT_STARTED)[-1].split(COMMIT_STARTED)[1].split()[0]
        landed = "after the table commit" if any(commit_id in line for line in log_lines(worker.log, COMMIT_FINISHED)) \
            else "before the table commit"  # fmt: skip
        worker.stop()  # the killed worker: forgets its state file
        time.sleep(2)  # the producer goes on while the worker is down
        worker.start(settings, connection, spec)
        time.sleep(5)
        workload.stop()
        connect_caught_up(worker, connection, spec)
        lost, duplicated = losses(table_event_ids(spark, settings.table_name), workload.ledger)
        worker.stop()
        deleted: list[str] = []

        def all_deleted() -> bool:
            done, in_use = delete_groups(connection, spec.name)
            deleted.extend(done)
            return not in_use

        wait_until(all_deleted, GROUP_SECONDS, interval=2.0, message="the sink's consumer groups deleted")
        worker.start(settings, connection, spec)
        connect_caught_up(worker, connection, spec)
        lost_after_reset, duplicated_after_reset = losses(table_event_ids(spark, settings.table_name), workload.ledger)
    finally:
        workload.stop()
        worker.stop()
    figures.record(
        "peers: Kafka Connect", f"SIGKILL mid-commit ({landed}), then offsets deleted",
        events=len(workload.ledger.good), lost=lost, duplicated=duplicated, groups_deleted=len(deleted),
        lost_after_offsets_deleted=lost_after_reset, duplicated_after_offsets_deleted=duplicated_after_reset,
    )  # fmt: skip
    assert len(workload.ledger.good) > 0
    assert lost == 0, f"{lost} of {len(workload.ledger.good)} events lost after the kill"
    assert spec.consumer_group in deleted, deleted
    assert lost_after_reset == 0


def checkpoint_batches(checkpoint: Path, log: str) -> set[int]:
    folder = checkpoint / log
    return {int(path.name) for path in folder.iterdir() if path.name.isdigit()} if folder.is_dir() else set()


def run_job(settings, table: str, checkpoint: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """The plain job as its own process group (so a SIGKILL takes its JVM too), output to ``log``."""
    command = [sys.executable, "-m", "icestream.jobs.kafka_to_iceberg", "--local", "--bootstrap",
               kafka_connection(settings).bootstrap, "--topic", settings.kafka_topic, "--table", table,
               "--checkpoint", str(checkpoint), *extra]  # fmt: skip
    with log.open("ab") as output:
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)


def test_sparks_plain_kafka_job_killed_mid_batch_keeps_exactly_once_with_its_checkpoint(
    spark, kafka_fresh, tmp_path: Path
) -> None:
    settings = kafka_fresh(partitions=2, prefix="kspeer", tables=False)
    table = f"{settings.namespace_name}.{settings.table}"
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "job.log"
    workload = Workload(settings, to="kafka", bad_every=0, duplicate_every=0).start(per_call=20, interval=0.2)
    job = run_job(settings, table, checkpoint, log, "--trigger", "1")
    try:
        # Killed once a batch past the first two has logged its offsets and not yet its commit.
        def under_way() -> list[int]:
            assert job.poll() is None, log.read_text(errors="replace")[-3000:]
            logged = checkpoint_batches(checkpoint, "offsets") - checkpoint_batches(checkpoint, "commits")
            return [batch for batch in logged if batch >= 2]

        in_flight = wait_until(under_way, JOB_SECONDS, interval=0.02, message="a batch under way")
        # Then just after its table commit (the catalog names a new metadata file), before its commit log: the
        # moment Iceberg's sink must skip the epoch when the batch runs again. If the commit log came first (the
        # moment was missed), it is killed then, in the next batch's planning.
        known = current_metadata_location(settings)
        wait_until(lambda: current_metadata_location(settings) != known or max(in_flight) in checkpoint_batches(
            checkpoint, "commits"), JOB_SECONDS, interval=0.005, message="the batch's table commit")  # fmt: skip
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=30)
        workload.stop()
    batch = max(checkpoint_batches(checkpoint, "offsets"))
    spark.catalog.refreshTable(table)
    epochs = {int(row.epoch) for row in spark.sql(
        f"SELECT summary['spark.sql.streaming.epochId'] AS epoch FROM {table}.snapshots").collect()}  # fmt: skip
    landed = "after the table commit" if batch in epochs else "before the table commit"
    for run in ("kept", "new"):
        if run == "new":
            checkpoint = tmp_path / "checkpoint-new"
        done = run_job(settings, table, checkpoint, log, "--available-now")
        assert done.wait(timeout=JOB_SECONDS) == 0, log.read_text(errors="replace")[-3000:]
        if run == "kept":
            lost, duplicated = losses(table_event_ids(spark, table), workload.ledger)
    lost_new, duplicated_new = losses(table_event_ids(spark, table), workload.ledger)
    figures.record(
        "peers: Spark plain job", f"SIGKILL in batch {batch} ({landed}), then a new checkpoint",
        events=len(workload.ledger.good), lost=lost, duplicated=duplicated, lost_with_new_checkpoint=lost_new,
        duplicated_with_new_checkpoint=duplicated_new,
    )  # fmt: skip
    assert len(workload.ledger.good) > 0
    assert (lost, duplicated) == (0, 0)
    assert lost_new == 0
