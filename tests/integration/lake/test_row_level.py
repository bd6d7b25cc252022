"""Row-level writes: copy-on-write vs merge-on-read, delete files in the health report, maintenance applying them,
commit properties on a MERGE, and which second readers apply position deletes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from icestream.errors import ConfigError
from icestream.lake.inspect import DATA_CONTENT
from icestream.lake.routine import MaintenancePlan, run_maintenance
from icestream.lake.rowlevel import with_commit_properties
from icestream.lake.statement import Statement
from icestream.lake.table import LakeTable
from icestream.queries import duckdb_engine as duck
from icestream.queries import pyiceberg_engine as ice
from icestream.queries.health import collect_stats

HOURS = 3


@pytest.fixture
def filled(spark, fresh):
    """A fresh events table with 3 closed hours of events (ev-0 .. ev-119), one commit per hour."""
    settings = fresh(shards=1, prefix="rowlvl")
    table = LakeTable(spark, settings.table_name)
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=HOURS + 1)
    for hour in range(HOURS):
        rows = [
            {"event_id": f"ev-{n}", "user_id": f"u{n % 5}", "event_type": "click",
             "event_ts": start + timedelta(hours=hour, minutes=n % 40)}
            for n in range(hour * 40, hour * 40 + 40)
        ]  # fmt: skip
        rows_frame(spark, table.name, rows).writeTo(table.name).append()  # one commit, one file per hour
    return settings, table


def rows_frame(spark, table: str, rows: list[dict]):
    """``rows`` with the table's columns (the others null)."""
    schema = spark.table(table).schema
    return spark.createDataFrame([tuple(row.get(field.name) for field in schema.fields) for row in rows], schema)


def duckdb_count(location: str) -> int:
    """Rows DuckDB reads from the table at ``location`` (a metadata file)."""
    connection = duck.connect()
    try:
        return int(connection.execute(f"SELECT count(*) FROM iceberg_scan('{location}')").fetchone()[0])
    finally:
        connection.close()


def files_by_content(table: LakeTable) -> dict[str, int]:
    files = table.inspect.files()
    return {
        "data": int((files["content"] == DATA_CONTENT).sum()),
        "delete": int((files["content"] != DATA_CONTENT).sum()),
    }


def test_copy_on_write_rewrites_files_and_merge_on_read_writes_delete_files(spark, filled) -> None:
    _, table = filled
    assert table.row_level.mode() == dict.fromkeys(table.row_level.mode(), "copy-on-write")  # Iceberg's default
    table.row_level.delete("event_id IN (:a, :b)", {"a": "ev-1", "b": "ev-2"})
    assert files_by_content(table)["delete"] == 0, "copy-on-write: the file was rewritten without them"

    table.row_level.set_mode("merge-on-read")
    assert set(table.row_level.mode().values()) == {"merge-on-read"}
    table.row_level.delete("event_id = :id", {"id": "ev-50"})
    table.row_level.update("event_type = 'purchase'", "event_id = :id", {"id": "ev-90"})
    assert files_by_content(table)["delete"] == 2, "one position delete file per DML"
    stats = collect_stats(table)
    assert (stats.delete_files, stats.deleted_rows) == (2, 2)
    assert stats.records == 120 - 2 + 1, "data files count the updated row's new copy; its old copy is a deleted row"
    assert spark.table(table.name).count() == 120 - 3
    with pytest.raises(ConfigError, match="row-level mode"):
        table.row_level.set_mode("merge-on-write")


def test_second_readers_apply_position_deletes(spark, filled) -> None:
    settings, table = filled
    table.row_level.set_mode("merge-on-read")
    table.row_level.delete("user_id = 'u1'")
    assert files_by_content(table)["delete"] > 0
    expected = spark.table(table.name).count()
    assert expected == 120 - 24
    location, _ = table.inspect.metadata_location()
    duck_rows = duckdb_count(location)
    assert duck_rows == expected, "DuckDB applies position deletes"
    assert len(ice.open_table(settings).scan().to_arrow()) == expected, "pyiceberg applies position deletes"


def test_maintenance_applies_delete_files_and_the_health_report_clears(spark, filled) -> None:
    _, table = filled
    table.row_level.set_mode("merge-on-read")
    for number in (3, 45, 85):
        table.row_level.delete("event_id = :id", {"id": f"ev-{number}"})
    assert collect_stats(table).deleted_rows == 3
    rows = spark.table(table.name).count()
    plan = MaintenancePlan.scheduled(None, steps=("compact",))
    (compact,) = run_maintenance(table, plan)
    assert compact.ok, compact.line()
    assert compact.changed["delete files removed"] == 3
    assert "delete-file-threshold" in str(compact.outcome.statement)
    assert files_by_content(table)["delete"] == 0
    assert (collect_stats(table).delete_files, collect_stats(table).deleted_rows) == (0, 0)
    assert spark.table(table.name).count() == rows


def test_a_commits_position_deletes_are_its_own_not_the_earlier_ones_it_carried_over(spark, filled) -> None:
    _, table = filled
    table.row_level.set_mode("merge-on-read")
    table.row_level.update("event_type = 'purchase'", "event_id IN ('ev-1', 'ev-2')")
    assert table.row_level.last_commit()["position-deletes"] == 2
    table.row_level.delete("event_id IN ('ev-3', 'ev-4', 'ev-5')")  # the same data file as the update's rows
    deleted = table.row_level.last_commit()
    # Iceberg rewrites the file's earlier delete file into the new one: its added-position-deletes carries them.
    assert deleted["added-position-deletes"] == 5
    assert deleted["removed-position-deletes"] == 2
    assert deleted["position-deletes"] == 3, "the rows the DELETE deleted"
    assert collect_stats(table).deleted_rows == 2 + 3


def test_a_merge_commits_its_snapshot_properties(spark, filled) -> None:
    _, table = filled
    now = datetime.now(UTC)
    changes = [{"event_id": "ev-7", "user_id": "u2", "event_type": "view", "event_ts": now},
               {"event_id": "ev-new", "user_id": "u9", "event_type": "click", "event_ts": now}]  # fmt: skip
    rows_frame(spark, table.name, changes).createOrReplaceTempView("rowlvl_changes")
    table.row_level.merge(
        "rowlvl_changes", "t.event_id = s.event_id",
        "WHEN MATCHED THEN UPDATE SET event_type = s.event_type WHEN NOT MATCHED THEN INSERT *",
        properties={"icestream.positions": '{"shardId-000000000000":"AFTER:42"}', "icestream.batch-id": "7"},
    )  # fmt: skip
    last = table.run(Statement(f"SELECT operation, summary FROM {table.name}.snapshots ORDER BY committed_at DESC"))\
        .first()  # fmt: skip
    assert last.summary["icestream.positions"] == '{"shardId-000000000000":"AFTER:42"}'
    assert last.summary["icestream.batch-id"] == "7"
    assert spark.table(table.name).where("event_id = 'ev-7'").first().event_type == "view"

    def failing() -> None:
        raise ValueError("the action's own error")

    with pytest.raises(ValueError, match="the action's own error"):
        with_commit_properties(spark, {"k": "v"}, failing)


def test_deletion_vectors_of_format_3_are_applied_by_every_reader_here(spark, fresh) -> None:
    from pyiceberg.table import StaticTable

    settings = fresh(shards=1, prefix="rowdv")
    table = LakeTable(spark, settings.companion_table_name("dv"))
    table.apply(Statement(f"CREATE TABLE {table.name} (id BIGINT, v STRING) USING iceberg "
                          "TBLPROPERTIES ('format-version' = '3')", writes=True))  # fmt: skip
    table.apply(Statement(f"INSERT INTO {table.name} SELECT id, CAST(id AS STRING) FROM range(100)", writes=True))
    table.row_level.set_mode("merge-on-read")
    table.row_level.delete("id < 10")
    formats = set(table.run(Statement(f"SELECT file_format FROM {table.name}.delete_files")).toPandas()["file_format"])
    assert formats == {"PUFFIN"}, "format 3 writes deletion vectors (Puffin), not position delete files"
    location, _ = table.inspect.metadata_location()
    duck_rows = duckdb_count(location)
    assert (spark.table(table.name).count(), duck_rows, len(StaticTable.from_metadata(location).scan().to_arrow())) == (
        90,
        90,
        90,
    ), "Spark, DuckDB and pyiceberg all apply the deletion vector"
