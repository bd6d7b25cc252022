"""Change data against the emulator: a keyed table ends equal to the entity stream's truth, read by DuckDB and
pyiceberg, across crashes, a MERGE racing compaction, both shapes and both row-level modes."""

from __future__ import annotations

import pytest

from icestream.config import load_settings
from icestream.errors import ConfigError, IngestError
from icestream.ingest.changes import ChangeSpec
from icestream.ingest.query import start_ingest
from icestream.lake.routine import MaintenancePlan, run_maintenance
from icestream.lake.summary import POSITIONS_KEY
from icestream.lake.table import LakeTable
from icestream.queries import pyiceberg_engine as ice
from icestream.queries.health import collect_stats
from icestream.synthetic.entities import ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER, order_changes
from tests.helpers.changes import change_settings, drain_changes, duckdb_rows, expected_rows, rejected_reasons
from tests.helpers.crash import crash_at
from tests.helpers.ingest import refresh_tables
from tests.helpers.streams import put


@pytest.mark.parametrize("shape", ["flat", "debezium"])
def test_a_change_stream_ends_equal_to_its_truth_read_by_duckdb(spark, emulator, shape: str) -> None:
    settings = change_settings("cdc")
    stream = order_changes(orders=30, changes=360, seed=11, shape=shape)
    spec = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER, shape)
    third = len(stream.records) // 3
    batches = 0
    for part in (stream.records[:third], stream.records[third : 2 * third], stream.records[2 * third :]):
        put(settings, part)
        batches += len(drain_changes(spark, settings, spec).recent_progress)
    refresh_tables(spark, settings)
    table = LakeTable(spark, settings.table_name)
    assert duckdb_rows(table) == expected_rows(stream)
    deleted = {row.order_id for row in spark.table(settings.table_name).where("is_deleted").collect()}
    assert deleted == stream.deleted, "a deleted key stays as a tombstone"
    assert sum(rejected_reasons(spark, settings).values()) == stream.sent["malformed"]
    # One commit per batch, each carrying the table's positions (a MERGE: an overwrite).
    snapshots = spark.sql(
        f"SELECT operation, summary['{POSITIONS_KEY}'] AS positions FROM {settings.table_name}.snapshots"
    ).collect()
    assert len(snapshots) == batches
    assert all(snapshot.positions for snapshot in snapshots)


@pytest.mark.parametrize("phase", ["after_read", "between_commits", "after_commit"])
def test_a_crash_at_any_phase_is_recovered_exactly_once(spark, emulator, phase: str) -> None:
    settings = change_settings("cdccrash")
    stream = order_changes(orders=20, changes=240, seed=5)
    spec = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER)
    half = len(stream.records) // 2
    put(settings, stream.records[:half])
    drain_changes(spark, settings, spec, max_records_per_shard=40, max_batches=1)  # batch 0
    put(settings, stream.records[half:])
    with pytest.raises(IngestError, match="SimulatedCrashError"):
        drain_changes(spark, settings, spec, fault_hook=crash_at(phase, 1), batch_retries=0)
    refresh_tables(spark, settings)
    drain_changes(spark, settings, spec)
    refresh_tables(spark, settings)
    assert duckdb_rows(LakeTable(spark, settings.table_name)) == expected_rows(stream)
    # Each malformed record is rejected once although the batch that read it was read twice.
    assert sum(rejected_reasons(spark, settings).values()) == stream.sent["malformed"]


def test_a_merge_that_loses_a_race_with_compaction_is_retried_from_the_committed_positions(spark, emulator) -> None:
    settings = change_settings("cdcrace")
    stream = order_changes(orders=20, changes=240, seed=9)
    spec = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER)
    half = len(stream.records) // 2
    put(settings, stream.records[:half])
    drain_changes(spark, settings, spec)
    put(settings, stream.records[half:])
    # A second session has a catalog (and table cache) of its own: another writer, as far as this one knows.
    other = spark.newSession()
    compacted: list[int] = []

    def compact_meanwhile(phase: str, batch_id: int) -> None:
        if phase == "after_read" and not compacted:
            name = settings.table_name.split(".", 1)[1]
            (result,) = other.sql(
                f"CALL lake.system.rewrite_data_files(table => '{name}', options => map('rewrite-all', 'true'))"
            ).collect()
            compacted.append(result.rewritten_data_files_count)

    query = drain_changes(spark, settings, spec, fault_hook=compact_meanwhile)
    assert compacted == [1], "the compaction committed while the batch was between its read and its MERGE"
    operations = [
        row.operation for row in spark.sql(f"SELECT operation FROM {settings.table_name}.snapshots").collect()
    ]
    assert operations.count("replace") == 1
    assert query.recent_progress[0]["batch_id"] == 2, "batch 1 lost the race (its rejects were committed) and retried"
    refresh_tables(spark, settings)
    assert duckdb_rows(LakeTable(spark, settings.table_name)) == expected_rows(stream)
    assert sum(rejected_reasons(spark, settings).values()) == stream.sent["malformed"]


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_both_row_level_modes_end_equal_and_only_merge_on_read_leaves_delete_files(spark, emulator, mode) -> None:
    settings = change_settings("cdcmode", changes_mode=mode)
    stream = order_changes(orders=20, changes=200, seed=3)
    spec = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER)
    half = len(stream.records) // 2
    for part in (stream.records[:half], stream.records[half:]):
        put(settings, part)
        drain_changes(spark, settings, spec)
    refresh_tables(spark, settings)
    table = LakeTable(spark, settings.table_name)
    assert table.row_level.mode() == dict.fromkeys(("write.delete.mode", "write.update.mode", "write.merge.mode"), mode)
    stats = collect_stats(table)
    if mode == "merge-on-read":
        assert stats.delete_files > 0
        assert stats.deleted_rows > 0
    else:
        assert (stats.delete_files, stats.deleted_rows) == (0, 0)
    assert duckdb_rows(table) == expected_rows(stream)
    # Compaction applies the delete files and drops every one of them; the rows stay.
    (compaction,) = run_maintenance(table, MaintenancePlan.scheduled(None, steps=("compact",)))
    assert compaction.ok, compaction.line()
    assert (collect_stats(table).delete_files, collect_stats(table).deleted_rows) == (0, 0)
    assert duckdb_rows(table) == expected_rows(stream)
    # pyiceberg applies the delete files too.
    scanned = ice.open_table(settings).scan().to_arrow().to_pylist()
    assert sorted(row["order_id"] for row in scanned if not row["is_deleted"]) == sorted(stream.truth)


def test_a_table_declared_another_way_is_refused_before_anything_is_read(spark, emulator) -> None:
    settings = change_settings("cdcdecl")
    spec = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER)
    put(settings, order_changes(orders=3, changes=10, seed=1).records)
    drain_changes(spark, settings, spec)
    other = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, None)
    with pytest.raises(ConfigError, match="exists with another declaration"):
        start_ingest(spark, settings, available_now=True, changes=other)
    events_settings = load_settings(stream_name=settings.stream_name, table="user_events_not_keyed_" + settings.table)
    from icestream.lake.table import setup_tables

    setup_tables(spark, events_settings)
    with pytest.raises(ConfigError, match="not a keyed table"):
        start_ingest(spark, events_settings, available_now=True, changes=spec)
