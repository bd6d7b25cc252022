"""``icestream maintain`` on a generated table: a dry run changes nothing; a real run compacts the closed
hours, expires snapshots but keeps the one carrying the ingest's positions, and removes an old orphan."""

from __future__ import annotations

import dataclasses
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from icestream.cli import main
from icestream.ingest import positions
from icestream.lake.routine import MaintenancePlan, run_maintenance
from icestream.lake.summary import BATCH_KEY, POSITIONS_KEY, QUERY_KEY, STREAM_KEY
from icestream.lake.table import LakeTable
from icestream.queries import health
from icestream.synthetic.generator import backfill_config
from tests.conftest import generated_table

END = datetime(2026, 11, 21, 6, 30, tzinfo=UTC)  # hours 04 and 05 are closed at END; 06 is being written
POSITIONS = {"shardId-000000000000": positions.after("49000000000000000007")}


@pytest.fixture(scope="module")
def written(spark):
    """Two and a half hours in appends of 50 rows, then one append that commits positions, as the ingest does."""
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    config = backfill_config(hours=2.5, count=400, end=END, seed=5, bad_rate=0.0, duplicate_rate=0.0)
    with generated_table(spark, "mt", config, chunk_rows=50) as (table_settings, name, _, _):
        batch = spark.table(name).limit(5).withColumn("event_id", F.concat("event_id", F.lit("-batch-7")))
        (
            batch.writeTo(name)
            .option(f"snapshot-property.{POSITIONS_KEY}", positions.encode_positions(POSITIONS))
            .option(f"snapshot-property.{STREAM_KEY}", table_settings.stream_name)
            .option(f"snapshot-property.{BATCH_KEY}", "7")
            .option(f"snapshot-property.{QUERY_KEY}", "test-query")
            .append()
        )
        yield table_settings, name


def _files_per_hour(table: LakeTable) -> dict[str, int]:
    return table.inspect.data_files().groupby("partition").size().to_dict()


def test_a_dry_run_prints_the_sql_and_changes_nothing(spark, written, capsys) -> None:
    table_settings, name = written
    table = LakeTable(spark, name)
    snapshots = list(table.inspect.snapshots()["snapshot_id"])
    files = list(table.inspect.data_files()["file_path"])

    assert main(["maintain", "--dry-run", "--table", table_settings.table]) == 0
    printed = capsys.readouterr().out
    assert printed.count("CALL lake.system.") == 4
    assert "prefix_listing => true" in printed
    assert f"table => '{table_settings.namespace}.{table_settings.table}'" in printed
    assert printed.count("planned (dry run), nothing changed") == 4
    assert list(table.inspect.snapshots()["snapshot_id"]) == snapshots
    assert list(table.inspect.data_files()["file_path"]) == files


def test_a_run_compacts_closed_hours_expires_and_keeps_the_positions(spark, written) -> None:
    table_settings, name = written
    table = LakeTable(spark, name)
    content = health.content_fingerprint(table)
    before = _files_per_hour(table)
    assert before["2026-11-21 06:00"] >= 2
    assert before["2026-11-21 05:00"] >= 2
    snapshots_before = len(table.inspect.snapshots())
    orphan = (
        Path(table_settings.warehouse_uri)
        / table_settings.namespace
        / table_settings.table
        / "data"
        / "crashed.parquet"
    )
    orphan.write_bytes(b"left by a writer that crashed before committing")
    four_days_ago = time.time() - 4 * 86400
    os.utime(orphan, (four_days_ago, four_days_ago))

    now = datetime.now(UTC)
    plan = dataclasses.replace(
        MaintenancePlan.scheduled(table_settings.stream_name, now=now),
        compact_before=datetime(2026, 11, 21, 6, 0, tzinfo=UTC),  # the start of END's hour
        expire_before=now,  # every snapshot is old enough; only the kept ones stay
    )
    results = {result.step: result for result in run_maintenance(table, plan)}
    assert all(result.ok for result in results.values()), [result.line() for result in results.values()]
    assert results["compact"].changed["files rewritten"] > results["compact"].changed["files added"] >= 2
    assert results["manifests"].changed["manifests added"] >= 1
    # Kept: the compaction and manifest snapshots and the one with the positions.
    assert results["expire"].changed["snapshots expired"] == snapshots_before - 1
    assert "retain_last => 3)" in results["expire"].outcome.statement.sql
    assert results["orphans"].changed == {"orphans removed": 1}
    assert not orphan.exists()

    after = _files_per_hour(table)
    assert after["2026-11-21 04:00"] == after["2026-11-21 05:00"] == 1
    assert after["2026-11-21 06:00"] == before["2026-11-21 06:00"]  # the open hour is left alone
    assert health.content_fingerprint(table) == content
    committed = positions.load_committed(spark, name, table_settings.stream_name)
    assert (committed.positions, committed.batch_id, committed.source) == (POSITIONS, 7, "snapshot")


def test_the_command_runs_and_says_which_step_failed(written, capsys) -> None:
    table_settings, _ = written
    assert main(["maintain", "--table", table_settings.table, "--steps", "compact,manifests"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in printed if line.startswith(("compact ", "manifests "))] == [
        "compact", "manifests",
    ]  # fmt: skip

    assert main(["maintain", "--table", "no_such_table", "--steps", "manifests"]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: manifests: ")
    assert "\n" not in error


def test_the_rejects_table_is_compacted_by_its_own_time_column(spark, fresh, capsys) -> None:
    """Rejects are partitioned by ``days(ingest_ts)`` and have no event_ts: closed days compact, today stays."""
    settings = fresh(shards=1, prefix="mtrej")
    name = settings.rejects_table_name
    table = LakeTable(spark, name)
    now = datetime.now(UTC)
    for day in (now - timedelta(days=2), now - timedelta(days=2), now, now):
        row = (b"x", "x", "invalid_json", "detail", 1, "shardId-000000000000", "1", "k", day, day)
        spark.createDataFrame([row], spark.table(name).schema).writeTo(name).append()
    before = _files_per_hour(table)
    assert sorted(before.values()) == [2, 2]

    assert main(["maintain", "--table", f"{settings.table}_rejects", "--steps", "compact"]) == 0
    printed = capsys.readouterr().out
    assert "files rewritten 2" in printed, printed
    after = _files_per_hour(table)
    assert sorted(after.values()) == [1, 2]  # the closed day is one file; today is left alone
    assert spark.table(name).count() == 4
    assert table.maintenance.time_partition_column() == "ingest_ts"
    assert LakeTable(spark, settings.table_name).maintenance.time_partition_column() == "event_ts"
