"""Table health and maintenance: a table of many small files is diagnosed, compacted and expired
without changing its rows or the ingest's committed position."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from icestream import health, tables
from icestream.config import Settings, load_settings
from icestream.errors import ConfigError
from icestream.ingest import positions
from icestream.ingest.bulk import load_payloads
from icestream.synthetic.generator import backfill_config, generate

STREAM = "health-test-stream"
POSITIONS = {"shardId-000000000000": positions.after("49000000000000000001"), "shardId-000000000001": "TRIM_HORIZON"}


@pytest.fixture(scope="module")
def small_files_table(spark, settings: Settings) -> Settings:
    """Two hours of events in a dozen small appends, then one append that commits positions, as the ingest does."""
    table_settings = load_settings(table=f"h_{uuid.uuid4().hex[:10]}", stream_name=STREAM)
    tables.setup_tables(spark, table_settings)
    name = table_settings.table_name
    positions.mark_source_stream(spark, name, STREAM)
    config = backfill_config(hours=2.0, count=1200, end=datetime(2026, 11, 19, 12, 0, tzinfo=UTC), seed=11)
    records, _ = generate(config)
    load_payloads(spark, name, ((r.data, r.partition_key) for r in records if r.kind == "event"), chunk_rows=100)
    _commit_batch(spark, name, batch_id=41)
    return table_settings


def _commit_batch(spark, name: str, batch_id: int) -> None:
    """Append five rows (copies with new ids) with the positions in the snapshot summary, as the ingest does."""
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    batch = spark.table(name).limit(5).withColumn("event_id", F.concat("event_id", F.lit(f"-batch-{batch_id}")))
    (
        batch.writeTo(name)
        .option(f"snapshot-property.{positions.POSITIONS_KEY}", positions.encode_positions(POSITIONS))
        .option(f"snapshot-property.{positions.STREAM_KEY}", STREAM)
        .option(f"snapshot-property.{positions.BATCH_KEY}", str(batch_id))
        .option(f"snapshot-property.{positions.QUERY_KEY}", "test-query")
        .append()
    )


@pytest.mark.integration
def test_metadata_tables_have_the_columns_used(spark, small_files_table: Settings) -> None:
    name = small_files_table.table_name
    files = health.data_files(spark, name)
    assert len(files) >= 10
    assert set(files["content"]) == {health.DATA}
    assert files["partition"].str.match(r"^2026-11-19 \d\d:00$").all()
    parts = health.partitions(spark, name)
    assert parts["file_count"].sum() == len(files)
    assert parts["record_count"].sum() == spark.table(name).count()
    snaps = health.snapshots(spark, name)
    assert snaps["operation"].eq("append").all()
    assert snaps["ingest_batch"].dropna().tolist() == [41]
    assert len(health.manifests(spark, name)) >= 1
    meta = health.metadata_files(spark, name)
    assert set(meta["kind"]) == {"metadata.json", "previous metadata.json", "manifest list", "manifest"}
    assert (meta["kind"] == "metadata.json").sum() == 1
    assert meta["bytes"].notna().all()
    assert (meta["bytes"] > 0).all()


@pytest.mark.integration
def test_maintenance_fixes_small_files_and_keeps_rows_and_positions(spark, small_files_table: Settings) -> None:
    name = small_files_table.table_name
    thresholds = health.HealthThresholds(max_files_per_partition=3, max_snapshots=5)
    before = health.collect_stats(spark, name)
    report = health.health_report(before, thresholds).set_index("check")
    assert report.loc["small-file ratio", "status"] == "WARN"
    assert report.loc["files in the fullest partition", "status"] == "WARN"
    assert report.loc["snapshots", "status"] == "WARN"
    assert report.loc["delete files / data files", "status"] == "OK"
    content = health.content_fingerprint(spark, name)
    committed = positions.load_committed(spark, name, STREAM)
    assert committed.positions == POSITIONS
    assert committed.source == "snapshot"

    compacted = health.rewrite_data_files(spark, name, options=health.default_rewrite_options())
    assert compacted["rewritten_data_files_count"] == before.data_files
    assert compacted["added_data_files_count"] == before.partitions
    assert health.rewrite_manifests(spark, name)["added_manifests_count"] >= 1
    keep = health.retain_for_positions(spark, name, STREAM)
    assert keep == 3  # the two maintenance snapshots and the one with the positions
    expired = health.expire_snapshots(spark, name, older_than=datetime.now(UTC), retain_last=keep)
    # The snapshot with the positions still references the small files: they stay until the next batch.
    assert expired["deleted_data_files_count"] == 0
    assert expired["deleted_manifest_lists_count"] == before.snapshots - 1

    after = health.collect_stats(spark, name)
    assert after.data_files == before.partitions < before.data_files
    assert after.snapshots == keep
    assert after.records == before.records
    assert health.content_fingerprint(spark, name) == content
    report = health.health_report(after, thresholds).set_index("check")
    file_checks = ["small-file ratio", "average file size / achievable", "files in the fullest partition"]
    assert (report.loc[file_checks, "status"] == "OK").all(), report
    again = positions.load_committed(spark, name, STREAM)
    assert again.positions == committed.positions
    assert again.batch_id == committed.batch_id == 41
    assert again.source == "snapshot"

    # The ingest's next batch carries the positions forward; the next expiry frees the small files.
    _commit_batch(spark, name, batch_id=42)
    keep = health.retain_for_positions(spark, name, STREAM)
    assert keep == 1
    expired = health.expire_snapshots(spark, name, older_than=datetime.now(UTC), retain_last=keep)
    assert expired["deleted_data_files_count"] == before.data_files
    assert positions.load_committed(spark, name, STREAM).batch_id == 42
    final = health.collect_stats(spark, name)
    assert final.snapshots == 1
    assert final.metadata_bytes < after.metadata_bytes


@pytest.mark.integration
def test_sort_rewrite_of_closed_hours_keeps_content(spark, small_files_table: Settings) -> None:
    name = small_files_table.table_name
    content = health.content_fingerprint(spark, name)
    result = health.rewrite_data_files(
        spark,
        name,
        strategy="sort",
        sort_order="event_type ASC, event_ts ASC NULLS LAST",
        options={"rewrite-all": "true"},
        before=datetime(2026, 11, 19, 11, 0, tzinfo=UTC),
    )
    assert result["rewritten_data_files_count"] >= 1
    assert health.content_fingerprint(spark, name) == content
    assert positions.load_committed(spark, name, STREAM).positions == POSITIONS


@pytest.mark.integration
def test_remove_orphan_files_only_touches_old_unreferenced_files(spark, small_files_table: Settings) -> None:
    name = small_files_table.table_name
    table_settings = small_files_table
    data_folder = Path(table_settings.warehouse_uri) / table_settings.namespace / table_settings.table / "data"
    orphan = data_folder / "orphan-from-a-crashed-writer.parquet"
    orphan.write_bytes(b"not referenced by any snapshot")
    two_days_ago = time.time() - 2 * 86400
    os.utime(orphan, (two_days_ago, two_days_ago))
    fresh = data_folder / "being-written-now.parquet"
    fresh.write_bytes(b"a running writer's file, not committed yet")
    cutoff = datetime.now(UTC) - timedelta(hours=25)

    listed = health.remove_orphan_files(spark, name, older_than=cutoff, dry_run=True)
    assert [Path(location.removeprefix("file:")).name for location in listed] == [orphan.name]
    assert orphan.exists()
    health.remove_orphan_files(spark, name, older_than=cutoff, dry_run=False)
    assert not orphan.exists()
    assert fresh.exists()
    with pytest.raises(ConfigError):
        health.remove_orphan_files(spark, name, older_than=datetime.now(UTC) - timedelta(hours=1))
    fresh.unlink()


@pytest.mark.parametrize(
    "bad",
    [
        {"sort_order": "event_type; DROP TABLE x"},
        {"sort_order": "event_type ASC, 1x DESC"},
        {"options": {"min-input-files": "2'); --"}},
        {"strategy": "zorder"},
    ],
)
def test_procedure_arguments_are_validated(bad: dict) -> None:
    arguments = {"strategy": "sort", "sort_order": "event_ts ASC", **bad}
    with pytest.raises(ConfigError):
        health.rewrite_data_files(None, "lake.ns.t", **arguments)  # type: ignore[arg-type]


def test_literals() -> None:
    moment = datetime(2026, 11, 19, 13, 5, 7, tzinfo=UTC)
    assert health.timestamp_literal(moment) == "TIMESTAMP '2026-11-19 13:05:07+00:00'"
    with pytest.raises(ConfigError):
        health.timestamp_literal(datetime(2026, 11, 19))
    assert health.sort_order_literal("event_type,event_ts desc nulls first") == (
        "event_type ASC, event_ts DESC NULLS FIRST"
    )
    assert health.partition_label({"event_ts_hour": 498677}) == "2026-11-21 05:00"
