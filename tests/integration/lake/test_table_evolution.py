"""Evolution by hand on a copy: a second partition spec, a read pruned across both, a rename and a widened type."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from icestream.errors import ConfigError
from icestream.lake.statement import Statement
from icestream.lake.table import LakeTable, recreate_events_copy
from icestream.lake.table_evolution import Evolution, partition_transform, promoted_type
from icestream.lake.window import event_time_slices
from icestream.synthetic.generator import backfill_config
from icestream.timestamps import to_micros
from tests.conftest import generated_table


@pytest.fixture(scope="module")
def evolved(spark, settings):
    """A copy with two appends under ``hours(event_ts)``, then ``bucket(4, user_id)`` and a third append."""
    end = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    config = backfill_config(hours=3, count=4000, end=end, seed=8, bad_rate=0.0, duplicate_rate=0.0)
    with generated_table(spark, "evo", config) as (local, name, _, _):
        events = LakeTable(spark, name)
        copy = recreate_events_copy(spark, local, suffix="evolution")
        slices = event_time_slices(events, 3)
        appended = [copy.versions.append_window(events, span) for span in slices[:2]]
        evolution = Evolution(copy)
        specs_before = evolution.specs()
        added = evolution.add_partition_field("bucket", "user_id", 4)
        specs_after_alter = evolution.specs()
        copy.versions.add_column("duration_ms", "INT")
        appended.append(copy.versions.append_window(events, slices[2]))
        yield copy, evolution, slices, appended, (specs_before, added, specs_after_alter)
        spark.sql(f"DROP TABLE IF EXISTS {copy.name} PURGE")


def test_a_partition_field_is_a_new_spec_for_new_writes_only(evolved) -> None:
    copy, evolution, _, appended, (specs_before, added, specs_after_alter) = evolved
    assert str(added.statement) == f"ALTER TABLE {copy.name} ADD PARTITION FIELD bucket(4, user_id)"
    assert specs_before["spec_id"].tolist() == specs_after_alter["spec_id"].tolist() == [0]
    assert specs_before["data_files"].tolist() == specs_after_alter["data_files"].tolist()
    now = evolution.specs().set_index("spec_id")
    assert now.index.tolist() == [0, 1]
    assert int(now.loc[0, "rows"]) == appended[0] + appended[1]
    assert int(now.loc[1, "rows"]) == appended[2]
    assert copy.last_statement.sql.startswith("SELECT spec_id, count(*) AS data_files")


def test_a_lookup_is_pruned_in_both_specs(spark, evolved) -> None:
    copy, evolution, slices, _, _ = evolved
    user = spark.sql(f"SELECT user_id FROM {copy.name} WHERE event_ts >= timestamp_micros({to_micros(slices[2].start)})"
                     " LIMIT 1").first().user_id  # fmt: skip
    lookup = Statement(
        f"SELECT event_id FROM {copy.name} WHERE user_id = :user AND event_ts >= timestamp_micros(:since)",
        args={"user": user, "since": to_micros(slices[1].start)},
    )
    pruned = evolution.scanned_files(lookup)
    assert copy.last_statement == lookup
    everything = evolution.scanned_files(Statement(f"SELECT event_id FROM {copy.name}"))
    files = int(evolution.specs()["data_files"].sum())
    expected = spark.sql(lookup.sql, args=dict(lookup.args)).count()
    assert pruned["rows"] == expected > 0
    assert everything["data files read"] == files
    assert everything["data files skipped"] == 0
    assert 0 < pruned["data files read"] < files
    assert pruned["data files skipped"] > 0


def test_rename_and_widening_change_metadata_only(spark, evolved) -> None:
    copy, evolution, _, appended, _ = evolved
    files_before = set(copy.inspect.data_files()["file_path"])
    before_id = copy.inspect.current_snapshot_id()
    total_before = spark.sql(f"SELECT sum(duration_ms) AS s, count(session_id) AS n FROM {copy.name}").first()
    renamed = evolution.rename_column("session_id", "visit_id")
    assert renamed.statement.sql == f"ALTER TABLE {copy.name} RENAME COLUMN session_id TO visit_id"
    widened = evolution.widen_column("duration_ms", "bigint")
    assert widened.statement.sql == f"ALTER TABLE {copy.name} ALTER COLUMN duration_ms TYPE BIGINT"
    types = dict(spark.table(copy.name).dtypes)
    assert types["duration_ms"] == "bigint"
    assert "session_id" not in types
    assert types["visit_id"] == "string"
    total_after = spark.sql(f"SELECT sum(duration_ms) AS s, count(visit_id) AS n FROM {copy.name}").first()
    assert (total_after.s, total_after.n) == (total_before.s, total_before.n)
    assert total_after.n == sum(appended)
    assert total_after.s > 0
    assert set(copy.inspect.data_files()["file_path"]) == files_before
    assert "session_id" in copy.versions.columns_at(before_id)  # the older snapshot reads with its schema
    with pytest.raises(ConfigError, match="not a promotion"):
        evolution.widen_column("duration_ms", "INT")
    with pytest.raises(ConfigError, match="not in"):
        evolution.widen_column("absent", "BIGINT")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [(("bucket", "user_id", 8), "bucket(8, user_id)"), (("days", "event_ts"), "days(event_ts)"),
     (("identity", "event_type"), "event_type"), (("truncate", "user_id", 4), "truncate(4, user_id)")],
)  # fmt: skip
def test_partition_transforms_are_written_as_iceberg_ddl(arguments, expected) -> None:
    assert partition_transform(*arguments) == expected


@pytest.mark.parametrize(
    "arguments", [("bucket", "user_id"), ("hours", "event_ts", 2), ("weeks", "event_ts"), ("days", "ts; DROP")]
)
def test_bad_partition_transforms_are_refused(arguments) -> None:
    with pytest.raises(ConfigError):
        partition_transform(*arguments)


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [("int", "BIGINT", True), ("float", "double", True), ("decimal(10,2)", "DECIMAL(12,2)", True),
     ("bigint", "INT", False), ("string", "BIGINT", False), ("decimal(10,2)", "DECIMAL(12,3)", False)],
)  # fmt: skip
def test_only_iceberg_promotions_are_allowed(current, target, allowed) -> None:
    if allowed:
        assert promoted_type(current, target).replace(" ", "") == target.upper().replace(" ", "")
    else:
        with pytest.raises(ConfigError, match="not a promotion"):
            promoted_type(current, target)
