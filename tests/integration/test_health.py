"""Table health and maintenance: a table of many small files is diagnosed, compacted and expired
without changing its rows or the ingest's committed position."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from icestream.config import Settings, load_settings
from icestream.demos import health_demo
from icestream.errors import ConfigError
from icestream.file_load.bulk import load_payloads
from icestream.ingest import positions
from icestream.lake.inspect import DATA_CONTENT
from icestream.lake.maintenance import default_rewrite_options
from icestream.lake.summary import BATCH_KEY, POSITIONS_KEY, QUERY_KEY, STREAM_KEY
from icestream.lake.table import LakeTable, setup_tables
from icestream.queries import file_skipping, health
from icestream.synthetic.generator import backfill_config, generate

STREAM = "health-test-stream"
POSITIONS = {"shardId-000000000000": positions.after("49000000000000000001"), "shardId-000000000001": "TRIM_HORIZON"}


@pytest.fixture(scope="module")
def small_files_table(spark, settings: Settings) -> Settings:
    """Two hours of events in a dozen small appends, then one append that commits positions, as the ingest does."""
    return _small_files(spark)


def _small_files(spark) -> Settings:
    table_settings = load_settings(table=f"h_{uuid.uuid4().hex[:10]}", stream_name=STREAM)
    setup_tables(spark, table_settings)
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
        .option(f"snapshot-property.{POSITIONS_KEY}", positions.encode_positions(POSITIONS))
        .option(f"snapshot-property.{STREAM_KEY}", STREAM)
        .option(f"snapshot-property.{BATCH_KEY}", str(batch_id))
        .option(f"snapshot-property.{QUERY_KEY}", "test-query")
        .append()
    )


@pytest.mark.integration
def test_metadata_tables_have_the_columns_used(spark, small_files_table: Settings) -> None:
    name = small_files_table.table_name
    inspect = LakeTable(spark, name).inspect
    files = inspect.files()
    assert len(files) >= 10
    assert set(files["content"]) == {DATA_CONTENT}
    assert files["partition"].str.match(r"^2026-11-19 \d\d:00$").all()
    pd.testing.assert_frame_equal(inspect.data_files(), files)  # no delete files: the same rows
    parts = inspect.partitions()
    assert parts["file_count"].sum() == len(files)
    assert parts["record_count"].sum() == spark.table(name).count()
    snaps = inspect.snapshots()
    assert snaps["operation"].eq("append").all()
    assert snaps["batch_id"].dropna().tolist() == [41]
    assert len(inspect.manifests()) >= 1
    meta = inspect.metadata_files()
    assert set(meta["kind"]) == {"metadata.json", "previous metadata.json", "manifest list", "manifest"}
    assert (meta["kind"] == "metadata.json").sum() == 1
    assert meta["bytes"].notna().all()
    assert (meta["bytes"] > 0).all()


@pytest.mark.integration
def test_dry_run_plans_maintenance_on_real_metadata_without_changing_the_table(spark, small_files_table) -> None:
    planned = LakeTable(spark, small_files_table.table_name, dry_run=True)
    snapshots = planned.inspect.snapshots()
    outcomes = [
        planned.maintenance.rewrite_data_files(options=default_rewrite_options()),
        planned.maintenance.rewrite_manifests(),
        planned.maintenance.expire_snapshots(older_than=datetime.now(UTC), keep_positions_of=STREAM),
    ]
    assert not any(outcome.ran for outcome in outcomes)
    assert all(outcome.counts == {} for outcome in outcomes)
    # The kept count was read from the real ancestry: the newest snapshot carries the positions.
    assert outcomes[-1].statement.sql.endswith("retain_last => 1)")
    assert [statement.writes for statement in planned.statements] == [False, True, True, True]
    pd.testing.assert_frame_equal(planned.inspect.snapshots(), snapshots)


@pytest.mark.integration
def test_maintenance_fixes_small_files_and_keeps_rows_and_positions(spark, small_files_table: Settings) -> None:
    name = small_files_table.table_name
    table = LakeTable(spark, name)
    thresholds = health.HealthThresholds(max_files_per_partition=3, max_snapshots=5)
    before = health.collect_stats(table)
    report = health.health_report(before, thresholds).set_index("check")
    assert report.loc["small-file ratio", "status"] == "WARN"
    assert report.loc["files in the fullest partition", "status"] == "WARN"
    assert report.loc["snapshots", "status"] == "WARN"
    assert report.loc["delete files / data files", "status"] == "OK"
    content = health.content_fingerprint(table)
    committed = positions.load_committed(spark, name, STREAM)
    assert committed.positions == POSITIONS
    assert committed.source == "snapshot"

    compacted = table.maintenance.rewrite_data_files(options=default_rewrite_options()).counts
    assert compacted["rewritten_data_files_count"] == before.data_files
    assert compacted["added_data_files_count"] == before.partitions
    assert table.maintenance.rewrite_manifests().counts["added_manifests_count"] >= 1
    keep = table.maintenance.retain_for_positions(STREAM)
    assert keep == 3  # the two maintenance snapshots and the one with the positions
    expired = table.maintenance.expire_snapshots(older_than=datetime.now(UTC), keep_positions_of=STREAM)
    assert f"retain_last => {keep})" in expired.statement.sql
    # The snapshot with the positions still references the small files: they stay until the next batch.
    assert expired.counts["deleted_data_files_count"] == 0
    assert expired.counts["deleted_manifest_lists_count"] == before.snapshots - 1

    after = health.collect_stats(table)
    assert after.data_files == before.partitions < before.data_files
    assert after.snapshots == keep
    assert after.records == before.records
    assert health.content_fingerprint(table) == content
    report = health.health_report(after, thresholds).set_index("check")
    file_checks = ["small-file ratio", "average file size / achievable", "files in the fullest partition"]
    assert (report.loc[file_checks, "status"] == "OK").all(), report
    again = positions.load_committed(spark, name, STREAM)
    assert again.positions == committed.positions
    assert again.batch_id == committed.batch_id == 41
    assert again.source == "snapshot"

    # The ingest's next batch carries the positions forward; the next expiry frees the small files.
    _commit_batch(spark, name, batch_id=42)
    assert table.maintenance.retain_for_positions(STREAM) == 1
    expired = table.maintenance.expire_snapshots(older_than=datetime.now(UTC), keep_positions_of=STREAM)
    assert expired.counts["deleted_data_files_count"] == before.data_files
    assert positions.load_committed(spark, name, STREAM).batch_id == 42
    final = health.collect_stats(table)
    assert final.snapshots == 1
    assert final.metadata_bytes < after.metadata_bytes


@pytest.mark.integration
def test_sort_rewrite_of_closed_hours_keeps_content(spark, small_files_table: Settings) -> None:
    name = small_files_table.table_name
    table = LakeTable(spark, name)
    content = health.content_fingerprint(table)
    result = table.maintenance.rewrite_data_files(
        strategy="sort",
        sort_order="event_type ASC, event_ts ASC NULLS LAST",
        options={"rewrite-all": "true"},
        before=datetime(2026, 11, 19, 11, 0, tzinfo=UTC),
    )
    assert result.counts["rewritten_data_files_count"] >= 1
    assert health.content_fingerprint(table) == content
    assert positions.load_committed(spark, name, STREAM).positions == POSITIONS


@pytest.mark.integration
def test_remove_orphan_files_only_touches_old_unreferenced_files(spark, small_files_table: Settings) -> None:
    table = LakeTable(spark, small_files_table.table_name)
    table_settings = small_files_table
    data_folder = Path(table_settings.warehouse_uri) / table_settings.namespace / table_settings.table / "data"
    orphan = data_folder / "orphan-from-a-crashed-writer.parquet"
    orphan.write_bytes(b"not referenced by any snapshot")
    two_days_ago = time.time() - 2 * 86400
    os.utime(orphan, (two_days_ago, two_days_ago))
    fresh = data_folder / "being-written-now.parquet"
    fresh.write_bytes(b"a running writer's file, not committed yet")
    cutoff = datetime.now(UTC) - timedelta(hours=25)

    listed = table.maintenance.remove_orphan_files(older_than=cutoff).values("orphan_file_location")
    assert "prefix_listing => true" in table.last_statement.sql  # listed through the table's FileIO
    assert [Path(location.removeprefix("file:")).name for location in listed] == [orphan.name]
    assert orphan.exists()
    table.maintenance.remove_orphan_files(older_than=cutoff, delete=True)
    assert not orphan.exists()
    assert fresh.exists()
    with pytest.raises(ConfigError):
        table.maintenance.remove_orphan_files(older_than=datetime.now(UTC) - timedelta(hours=1))
    fresh.unlink()


@pytest.mark.integration
def test_a_sort_rewrite_of_an_hours_copy_narrows_the_bounds_a_type_filter_reads(spark) -> None:
    # Files roll over at the target size only every thousand rows or so: the hour needs a few thousand.
    source_settings = load_settings(table=f"h_{uuid.uuid4().hex[:10]}", stream_name=STREAM)
    setup_tables(spark, source_settings)
    config = backfill_config(hours=1.0, count=4000, end=datetime(2026, 11, 19, 12, 0, tzinfo=UTC), seed=5)
    records, _ = generate(config)
    load_payloads(spark, source_settings.table_name, ((r.data, r.partition_key) for r in records if r.kind == "event"))
    source = LakeTable(spark, source_settings.table_name)
    hour = datetime(2026, 11, 19, 11, 0, tzinfo=UTC)
    hour_bytes = int(source.inspect.file_bounds("event_type")["file_size_in_bytes"].sum())
    copy = health_demo.copy_hour_for_sorting(spark, source_settings, source, hour, max(1, hour_bytes // 4))
    assert [statement.sql.split()[0] for statement in copy.statements][-2:] == ["ALTER", "INSERT"]
    types = file_skipping.distinct_values(copy, "event_type")
    before = file_skipping.files_read_per_value(copy.inspect.file_bounds("event_type"), types)
    assert (before["files read"] == before["of files"]).all()  # arrival order: every file holds every type
    assert before["of files"].iloc[0] > 1
    content = health.content_fingerprint(copy)
    outcome = copy.maintenance.rewrite_data_files(
        "sort", sort_order="event_type ASC, event_ts ASC", options={"rewrite-all": "true"}
    )
    assert outcome.counts["rewritten_data_files_count"] == before["of files"].iloc[0]
    after = file_skipping.files_read_per_value(copy.inspect.file_bounds("event_type"), types)
    assert health.content_fingerprint(copy) == content
    assert (after["records read"] <= before["records read"]).all()
    assert after["records read"].sum() < before["records read"].sum()


NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "09_table_health.ipynb"
MAINTENANCE_TAG = "maintenance-step"  # 09's cells that run the procedures and report what they removed


@pytest.mark.integration
def test_notebook_07s_expiry_and_orphan_cells_remove_what_they_report(spark, settings: Settings) -> None:
    """09's own cells (parameters, imports and the ones tagged maintenance-step), run as written on a small
    table: expiry drops snapshots and the small files compaction replaced, the orphan planted is deleted,
    and what the cells report is what left the table."""
    import json

    table_settings = _small_files(spark)
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    steps = [cell for cell in code if MAINTENANCE_TAG in cell["metadata"].get("tags", [])]
    assert len(steps) >= 5, "07 tags its compaction, expiry and orphan cells"
    table = LakeTable(spark, table_settings.table_name, echo=False)
    notebook: dict = {}
    for cell in code[:2]:  # the parameters at their defaults, then the imports
        exec("".join(cell["source"]), notebook)  # noqa: S102 - the notebook's own code, as the kernel runs it
    notebook.update(spark=spark, settings=table_settings, events_table=table, name=table.name,
                    catalog=table.catalog, identifier=table.identifier)  # fmt: skip
    for cell in steps:
        exec("".join(cell["source"]), notebook)  # noqa: S102

    after = set(table.inspect.snapshots()["snapshot_id"])
    reported = notebook["expiry_report"]
    listed = notebook["snapshots_to_expire"]  # the table's snapshots just before the CALL, as the cell showed them
    expired = set(listed.loc[notebook["expired"], "snapshot_id"])
    assert reported["snapshots expired"] == len(expired) == len(listed) - len(after) > 0
    assert expired.isdisjoint(after)
    assert reported["snapshots kept"] == len(after) == notebook["keep"] == 3  # positions, compaction, manifests
    assert reported["manifest lists deleted"] == len(expired)
    # Files only expired snapshots referenced are deleted; the kept positions snapshot still holds the small ones.
    assert reported["data files deleted"] == int(notebook["expiry"]["deleted_data_files_count"].iloc[0])
    planted = Path(notebook["planted"])
    assert planted.parent.name == "data"
    assert not planted.exists()
    assert [Path(location).name for location in notebook["found"]] == [planted.name]
    assert positions.load_committed(spark, table.name, STREAM).batch_id == 41
