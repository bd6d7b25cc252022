"""LakeTable.versions: time travel, tags, branches (write-audit-publish), rollback, schema evolution on a copy."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from icestream.lake.table import LakeTable, recreate_events_copy
from icestream.lake.window import Window, event_time_slices
from icestream.synthetic.generator import backfill_config
from icestream.timestamps import to_micros
from tests.conftest import generated_table


@pytest.fixture(scope="module")
def source(spark, settings):
    """A source table of about 6,000 clean events, some with the extra field ``experiment``."""
    end = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    config = backfill_config(hours=2, count=6000, end=end, seed=3, bad_rate=0.0, duplicate_rate=0.0,
                             extra_field_rate=0.2)  # fmt: skip
    with generated_table(spark, "q", config) as (local, name, _, _):
        yield local, LakeTable(spark, name)
    spark.sql(f"DROP TABLE IF EXISTS {name}_time_travel PURGE")


@pytest.fixture(scope="module")
def copy(spark, source):
    """The copy with three appends (three snapshots), and the fourth slice held back."""
    local, events = source
    target = recreate_events_copy(spark, local)
    slices = event_time_slices(events, 4)
    appended = [target.versions.append_window(events, span) for span in slices[:3]]
    return target, slices, appended


def test_copy_is_recreated_empty(spark, source, copy) -> None:
    local, events = source
    target, _, appended = copy
    assert target.name == f"{events.name}_time_travel"
    assert len(target.inspect.snapshots()) == 3
    assert sum(appended) < events.versions.row_count()
    # Re-running starts over: an empty table with no history.
    other = recreate_events_copy(spark, local, suffix="again")
    assert other.versions.row_count() == 0
    assert other.inspect.snapshots().empty
    spark.sql(f"DROP TABLE {other.name} PURGE")


def test_version_and_timestamp_as_of(copy) -> None:
    target, _, appended = copy
    snaps = target.inspect.snapshots()
    first, second = int(snaps.snapshot_id[0]), int(snaps.snapshot_id[1])
    assert target.versions.row_count(first) == appended[0]
    assert target.last_statement.sql == f"SELECT count(*) AS n FROM {target.name} VERSION AS OF {first}"
    assert target.versions.row_count(snaps.committed_at[1].to_pydatetime()) == appended[0] + appended[1]
    assert target.versions.total_records(second) == appended[0] + appended[1]
    compared = target.versions.compare_counts_by_type(first, second)
    assert compared["before"].sum() == appended[0]
    assert (compared["change"] == compared["after"] - compared["before"]).all()
    assert (compared["change"] >= 0).all()


def test_incremental_read_has_only_the_appended_rows(copy) -> None:
    target, slices, appended = copy
    snaps = target.inspect.snapshots()
    first, last = int(snaps.snapshot_id[0]), int(snaps.snapshot_id.iloc[-1])
    rows = target.versions.appended_between(first, last)
    assert rows.count() == appended[1] + appended[2]
    assert rows.count() == target.versions.total_records(last) - target.versions.total_records(first)
    oldest = rows.selectExpr("min(event_ts) AS t").first().t
    assert to_micros(oldest) > to_micros(slices[0].end)


def test_tag_names_a_snapshot(copy) -> None:
    target, _, appended = copy
    snapshot_id = target.inspect.current_snapshot_id()
    target.versions.drop_ref("backfill_loaded", "TAG")
    created = target.versions.create_tag("backfill_loaded", snapshot_id)
    assert created.ran
    assert created.statement.sql == (
        f"ALTER TABLE {target.name} CREATE OR REPLACE TAG backfill_loaded AS OF VERSION {snapshot_id}"
    )
    target.versions.create_tag("backfill_loaded", snapshot_id)  # idempotent
    assert target.versions.row_count("backfill_loaded") == sum(appended)
    shown = target.inspect.refs().set_index("name")
    assert shown.loc["backfill_loaded", "type"] == "TAG"
    assert shown.loc["backfill_loaded", "snapshot_id"] == snapshot_id


def test_write_audit_publish_and_rollback_and_schema_evolution(spark, source, copy) -> None:
    _, events = source
    target, slices, appended = copy
    versions, inspect = target.versions, target.inspect
    base = inspect.current_snapshot_id()
    # Write to a branch: main does not change until the branch is published.
    versions.drop_ref("audit", "BRANCH")
    versions.create_branch("audit")
    half = Window(slices[3].start, slices[3].start + (slices[3].end - slices[3].start) / 2)
    written = versions.append_window(events, half, branch="audit")
    assert versions.row_count() == sum(appended)
    assert versions.row_count("audit") == sum(appended) + written
    assert bool(versions.audit_append(base, "audit").iloc[0]["passed"])
    published = versions.fast_forward("main", "audit")
    assert published.output.iloc[0]["updated_ref"] == inspect.current_snapshot_id("audit")
    assert versions.row_count() == sum(appended) + written
    assert inspect.current_snapshot_id() == inspect.current_snapshot_id("audit")

    # A replayed batch fails the audit; rollback removes it.
    published = inspect.current_snapshot_id()
    versions.append_window(events, slices[0])
    audit = versions.audit_append(published, inspect.current_snapshot_id()).iloc[0]
    assert audit["ids_already_in_table"] == appended[0]
    assert audit["duplicate_event_ids"] == 0
    assert not audit["passed"]
    rolled = versions.rollback_to_snapshot(published)
    assert rolled.counts["current_snapshot_id"] == published
    assert inspect.current_snapshot_id() == published
    assert versions.row_count() == sum(appended) + written
    assert not inspect.history()["is_current_ancestor"].all()  # the replay is off main

    # A new optional column: no data file rewritten, old snapshots keep their schema.
    files_before = set(inspect.data_files()["file_path"])
    assert versions.add_column("experiment", "STRING").statement.sql.endswith("ADD COLUMN experiment STRING")
    assert versions.add_column("experiment", "STRING") is None  # idempotent
    assert set(inspect.data_files()["file_path"]) == files_before
    assert "experiment" not in versions.columns_at(base)
    assert "experiment" in versions.columns_at()
    rest = Window(half.end, slices[3].end)
    versions.append_window(events, rest)
    filled = spark.sql(
        f"SELECT count_if(experiment IS NOT NULL) AS filled, "
        f"count_if(experiment IS NOT NULL AND event_ts <= timestamp_micros({to_micros(half.end)})) AS old, "
        f"count_if(experiment <=> properties['experiment']) AS agree, count(*) AS n FROM {target.name}"
    ).first()
    assert filled.filled > 0
    assert filled.old == 0  # rows written before the column have no value
    assert set(inspect.data_files()["file_path"]) >= files_before
    expected = (
        spark.sql(
            f"SELECT count_if(properties['experiment'] IS NOT NULL) AS n FROM {events.name} "
            f"WHERE event_ts > timestamp_micros({to_micros(half.end)})"
        )
        .first()
        .n
    )
    assert filled.filled == expected


def test_appends_and_the_incremental_read_are_recorded(copy) -> None:
    target, _, _ = copy
    snaps = target.inspect.snapshots()
    first, last = int(snaps.snapshot_id[0]), int(snaps.snapshot_id.iloc[-1])
    target.versions.appended_between(first, last)
    assert str(target.last_statement) == (
        f'spark.read.format("iceberg").option("start-snapshot-id", "{first}").option("end-snapshot-id", "{last}")'
        f'.load("{target.name}")'
    )
    assert snaps["added_records"].dtype == "Int64"  # counts stay integers


def test_spark_wap_branch_stages_a_write_off_main(spark, source) -> None:
    local, events = source
    target = recreate_events_copy(spark, local, suffix="wap")
    slices = event_time_slices(events, 2)
    loaded = target.versions.append_window(events, slices[0])
    assert target.last_statement.sql.startswith(f"INSERT INTO {target.name}\nSELECT *")
    assert target.last_statement.writes
    target.versions.create_branch("audit")
    target.versions.enable_wap()
    with target.versions.wap_branch("audit"):
        staged = target.versions.append_window(events, slices[1])  # the plain name
        assert target.last_statement.sql.startswith(f"INSERT INTO {target.name}\n")
        assert target.versions.row_count() == loaded + staged  # the session reads its branch
    assert spark.conf.get("spark.wap.branch", None) is None
    assert target.versions.row_count() == loaded  # main did not move
    assert target.versions.row_count("audit") == loaded + staged
    spark.sql(f"DROP TABLE {target.name} PURGE")
