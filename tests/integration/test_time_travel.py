"""Time travel, tags, branches (write-audit-publish), rollback and schema evolution on a copy."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from icestream import queries, tables
from icestream.config import load_settings
from icestream.ingest.bulk import load_payloads
from icestream.synthetic.generator import backfill_config, generate
from icestream.timestamps import to_micros

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def source(spark, settings):
    """A source table of about 6,000 clean events, some with the extra field ``experiment``."""
    local = load_settings(table=f"q_{uuid.uuid4().hex[:10]}")
    name = tables.setup_tables(spark, local)[0]
    end = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    config = backfill_config(hours=2, count=6000, end=end, seed=3, bad_rate=0.0, duplicate_rate=0.0,
                             extra_field_rate=0.2)  # fmt: skip
    records, _ = generate(config)
    load_payloads(spark, name, ((r.data, r.partition_key) for r in records))
    yield local, name
    spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
    spark.sql(f"DROP TABLE IF EXISTS {name}_time_travel PURGE")


@pytest.fixture(scope="module")
def copy(spark, source):
    """The copy with three appends (three snapshots), and the fourth slice held back."""
    local, name = source
    target = queries.recreate_events_copy(spark, local)
    slices = queries.event_time_slices(spark, name, 4)
    appended = [queries.append_window(spark, name, target, span) for span in slices[:3]]
    return target, slices, appended


def count(spark, table: str, version=None) -> int:
    return spark.sql(f"SELECT count(*) AS n FROM {queries.as_of(table, version)}").first().n


def test_copy_is_recreated_empty(spark, source, copy) -> None:
    local, name = source
    target, _, appended = copy
    assert target == f"{name}_time_travel"
    assert len(queries.snapshots(spark, target)) == 3
    assert sum(appended) < count(spark, name)
    # Re-running starts over: an empty table with no history.
    other = queries.recreate_events_copy(spark, local, suffix="again")
    assert count(spark, other) == 0
    assert queries.snapshots(spark, other).empty
    spark.sql(f"DROP TABLE {other} PURGE")


def test_version_and_timestamp_as_of(spark, copy) -> None:
    target, _, appended = copy
    snaps = queries.snapshots(spark, target)
    first, second = int(snaps.snapshot_id[0]), int(snaps.snapshot_id[1])
    assert count(spark, target, first) == appended[0]
    assert count(spark, target, snaps.committed_at[1].to_pydatetime()) == appended[0] + appended[1]
    assert queries.total_records(spark, target, second) == appended[0] + appended[1]
    compared = queries.compare_counts_by_type(spark, target, first, second)
    assert compared["before"].sum() == appended[0]
    assert (compared["change"] == compared["after"] - compared["before"]).all()
    assert (compared["change"] >= 0).all()


def test_incremental_read_has_only_the_appended_rows(spark, copy) -> None:
    target, slices, appended = copy
    snaps = queries.snapshots(spark, target)
    first, last = int(snaps.snapshot_id[0]), int(snaps.snapshot_id.iloc[-1])
    rows = queries.appended_between(spark, target, first, last)
    assert rows.count() == appended[1] + appended[2]
    assert rows.count() == queries.total_records(spark, target, last) - queries.total_records(spark, target, first)
    oldest = rows.selectExpr("min(event_ts) AS t").first().t
    assert to_micros(oldest) > to_micros(slices[0].end)


def test_tag_names_a_snapshot(spark, copy) -> None:
    target, _, appended = copy
    snapshot_id = queries.current_snapshot_id(spark, target)
    queries.drop_ref(spark, target, "backfill_loaded", "TAG")
    queries.create_tag(spark, target, "backfill_loaded", snapshot_id)
    queries.create_tag(spark, target, "backfill_loaded", snapshot_id)  # idempotent
    assert count(spark, target, "backfill_loaded") == sum(appended)
    shown = queries.refs(spark, target).set_index("name")
    assert shown.loc["backfill_loaded", "type"] == "TAG"
    assert shown.loc["backfill_loaded", "snapshot_id"] == snapshot_id


def test_write_audit_publish_and_rollback_and_schema_evolution(spark, source, copy) -> None:
    _, name = source
    target, slices, appended = copy
    base = queries.current_snapshot_id(spark, target)
    # Write to a branch: main does not change until the branch is published.
    queries.drop_ref(spark, target, "audit", "BRANCH")
    queries.create_branch(spark, target, "audit")
    half = queries.Window(slices[3].start, slices[3].start + (slices[3].end - slices[3].start) / 2)
    written = queries.append_window(spark, name, target, half, branch="audit")
    assert count(spark, target) == sum(appended)
    assert count(spark, target, "audit") == sum(appended) + written
    assert bool(queries.audit_append(spark, target, base, "audit").iloc[0]["passed"])
    queries.fast_forward(spark, target, "main", "audit")
    assert count(spark, target) == sum(appended) + written
    assert queries.current_snapshot_id(spark, target) == queries.current_snapshot_id(spark, target, "audit")

    # A replayed batch fails the audit; rollback removes it.
    published = queries.current_snapshot_id(spark, target)
    queries.append_window(spark, name, target, slices[0])
    audit = queries.audit_append(spark, target, published, queries.current_snapshot_id(spark, target)).iloc[0]
    assert audit["ids_already_in_table"] == appended[0]
    assert audit["duplicate_event_ids"] == 0
    assert not audit["passed"]
    queries.rollback_to_snapshot(spark, target, published)
    assert queries.current_snapshot_id(spark, target) == published
    assert count(spark, target) == sum(appended) + written
    assert not queries.history(spark, target)["is_current_ancestor"].all()  # the replay is off main

    # A new optional column: no data file rewritten, old snapshots keep their schema.
    files_before = set(queries.data_files(spark, target)["file_path"])
    queries.add_column(spark, target, "experiment", "STRING")
    queries.add_column(spark, target, "experiment", "STRING")  # idempotent
    assert set(queries.data_files(spark, target)["file_path"]) == files_before
    assert "experiment" not in queries.columns_at(spark, target, base)
    assert "experiment" in queries.columns_at(spark, target)
    rest = queries.Window(half.end, slices[3].end)
    queries.append_window(spark, name, target, rest)
    filled = spark.sql(
        f"SELECT count_if(experiment IS NOT NULL) AS filled, "
        f"count_if(experiment IS NOT NULL AND event_ts <= timestamp_micros({to_micros(half.end)})) AS old, "
        f"count_if(experiment <=> properties['experiment']) AS agree, count(*) AS n FROM {target}"
    ).first()
    assert filled.filled > 0
    assert filled.old == 0  # rows written before the column have no value
    assert set(queries.data_files(spark, target)["file_path"]) >= files_before
    expected = (
        spark.sql(
            f"SELECT count_if(properties['experiment'] IS NOT NULL) AS n FROM {name} "
            f"WHERE event_ts > timestamp_micros({to_micros(half.end)})"
        )
        .first()
        .n
    )
    assert filled.filled == expected
