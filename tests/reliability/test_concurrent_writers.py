"""Three processes on one catalog: the ingest, a maintenance loop on the same table, appends to another.

The workbook's real-time workflow is the ingest in one process while a notebook compacts, rewrites
manifests and expires snapshots in another (07), and something else writes a second table. This
campaign runs exactly that for a bounded time (``make test``: about a minute; ``make reliability``:
10 minutes) with a live producer and a 1 s trigger, then checks: every event once (nothing lost,
nothing duplicated), every malformed record once, every append the third process saw commit is in
its table's history (no lost commit), and reports the commits each writer made and the ones that failed.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from icestream.lake.inspect import ancestry
from tests.reliability import figures
from tests.reliability.figures import size
from tests.reliability.workload import Workload, drain_and_verify
from tests.reliability.writer_runner import finish, spawn


def test_ingest_maintenance_and_another_writer_lose_nothing(spark, fresh, tmp_path: Path) -> None:
    settings = fresh(shards=2, prefix="cw")
    other = f"other_{uuid.uuid4().hex[:8]}"
    other_name = f"{settings.catalog}.{settings.namespace}.{other}"
    spark.sql(f"CREATE TABLE {other_name} (id BIGINT, written_at TIMESTAMP) USING iceberg")
    # Bounded: 45 s of writing. On a busy 2-core machine (each process first starts its own JVM)
    # 45 s gave 2-4 maintenance rounds, 13-15 appends and 7 ingest batches committing against one
    # another; 30 s gave 1 round and 2 appends, too few interleavings to show a lost commit, so
    # the bounded size stays. Full: 10 minutes, for the rare interleavings.
    seconds = float(size(45, 600))
    base_env = {**os.environ, "ICESTREAM_STREAM_NAME": settings.stream_name, "ICESTREAM_TABLE": settings.table}
    logs = {name: tmp_path / f"{name}.log" for name in ("ingest", "maintain", "append")}
    results = {name: tmp_path / f"{name}.json" for name in ("maintain", "append")}
    workload = Workload(settings).start(per_call=20, interval=0.25)
    processes = {
        "ingest": spawn("ingest_runner.py", [], {
            **base_env, "RELIABILITY_PHASE_LOG": str(tmp_path / "ingest.phases"), "RELIABILITY_TRIGGER": "1",
            "RELIABILITY_MAX_RECORDS": "500", "RELIABILITY_DURATION": str(seconds + 60),
            "RELIABILITY_STOP_FILE": str(tmp_path / "stop"),
        }, logs["ingest"]),
        "maintain": spawn("writer_runner.py", ["maintain"], {
            **base_env, "WRITER_SECONDS": str(seconds), "WRITER_RESULT": str(results["maintain"]),
        }, logs["maintain"]),
        "append": spawn("writer_runner.py", ["append"], {
            **base_env, "WRITER_SECONDS": str(seconds), "WRITER_TABLE": other,
            "WRITER_RESULT": str(results["append"]),
        }, logs["append"]),
    }  # fmt: skip
    try:
        for name in ("maintain", "append"):
            finish(processes[name], seconds + 180, logs[name])
    finally:
        workload.stop()
        (tmp_path / "stop").touch()  # the ingest ran before, during and after both other writers
    finish(processes["ingest"], 240, logs["ingest"])

    verdict = drain_and_verify(spark, settings, workload.ledger, tmp_path / "p.jsonl")
    spark.catalog.refreshTable(other_name)  # the appender committed from its own process

    maintained: dict[str, Any] = json.loads(results["maintain"].read_text())
    appended: dict[str, Any] = json.loads(results["append"].read_text())
    history = {int(snapshot.snapshotId()) for snapshot in ancestry(spark, other_name)}
    lost_appends = [snapshot for snapshot in appended["committed_snapshots"] if snapshot not in history]
    other_rows = spark.table(other_name).count()
    batches = sum(1 for line in (tmp_path / "ingest.phases").read_text().splitlines() if " after_commit " in line)
    figures.record(
        "concurrent writers", f"{settings.catalog_type} catalog, {seconds:.0f} s, 3 processes",
        ingest_batches=batches, events=verdict.events, lost=verdict.lost, duplicated=verdict.duplicated,
        rejects_lost=verdict.rejects_lost, rejects_duplicated=verdict.rejects_duplicated,
        maintenance_commits=sum(maintained["done"].values()), maintenance_failed=sum(maintained["failed"].values()),
        appends=len(appended["committed_snapshots"]), appends_failed=sum(appended["failed"].values()),
        lost_commits=len(lost_appends) + (other_rows != appended["rows"]),
    )  # fmt: skip
    assert batches >= 3, logs["ingest"].read_text()[-2000:]
    assert maintained["done"].get("rewrite_data_files", 0) >= 1, maintained
    assert appended["committed_snapshots"], appended
    assert not lost_appends, f"commits the appender saw succeed are missing from its table: {lost_appends[:5]}"
    assert other_rows == appended["rows"]
    assert verdict.exact, verdict
