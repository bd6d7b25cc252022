"""Maintenance statements in a dry run: the exact CALLs, and the checks on every argument."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from icestream.errors import ConfigError
from icestream.lake.maintenance import default_rewrite_options, sort_order_literal
from icestream.lake.table import LakeTable

MOMENT = datetime(2026, 11, 19, 13, 5, 7, tzinfo=UTC)


@pytest.fixture
def planned() -> LakeTable:
    return LakeTable(None, "lake.ns.t", dry_run=True)  # type: ignore[arg-type]


def test_rewrite_data_files_statements(planned: LakeTable) -> None:
    binpack = planned.maintenance.rewrite_data_files(options=default_rewrite_options())
    assert binpack.statement.sql == (
        "CALL lake.system.rewrite_data_files(table => 'ns.t', strategy => 'binpack', "
        "options => map('min-input-files', '2'))"
    )
    assert not binpack.ran
    sort = planned.maintenance.rewrite_data_files("sort", sort_order="event_type, event_ts desc", before=MOMENT)
    assert sort.statement.sql == (
        "CALL lake.system.rewrite_data_files(table => 'ns.t', strategy => 'sort', "
        "sort_order => 'event_type ASC, event_ts DESC', "
        "where => \"event_ts < TIMESTAMP '2026-11-19 13:05:07+00:00'\")"
    )
    assert list(planned.statements) == [binpack.statement, sort.statement]


def test_manifest_expiry_and_orphan_statements(planned: LakeTable) -> None:
    assert planned.maintenance.rewrite_manifests().statement.sql == (
        "CALL lake.system.rewrite_manifests(table => 'ns.t')"
    )
    assert planned.maintenance.expire_snapshots(MOMENT, retain_last=10).statement.sql == (
        "CALL lake.system.expire_snapshots(table => 'ns.t', "
        "older_than => TIMESTAMP '2026-11-19 13:05:07+00:00', retain_last => 10)"
    )
    listing = planned.maintenance.remove_orphan_files(MOMENT).statement.sql
    assert listing.endswith(
        "older_than => TIMESTAMP '2026-11-19 13:05:07+00:00', dry_run => true, prefix_listing => true)"
    )
    deleting = planned.maintenance.remove_orphan_files(MOMENT, delete=True).statement.sql
    assert deleting.endswith("dry_run => false, prefix_listing => true)")


def test_orphan_removal_lists_through_the_tables_file_io(planned: LakeTable) -> None:
    # Hadoop's FileSystem has no s3:// scheme off EMR ("No FileSystem for scheme s3", iceberg#11541);
    # prefix listing goes through the table's FileIO (S3FileIO on S3), which also lists s3:// paths.
    for delete in (False, True):
        assert "prefix_listing => true" in planned.maintenance.remove_orphan_files(MOMENT, delete=delete).statement.sql


@pytest.mark.parametrize(
    "bad",
    [
        {"sort_order": "event_type; DROP TABLE x"},
        {"sort_order": "event_type ASC, 1x DESC"},
        {"options": {"min-input-files": "2'); --"}},
        {"strategy": "zorder"},
        {"strategy": "sort", "sort_order": None},
        {"before": datetime(2026, 11, 19)},
    ],
)
def test_procedure_arguments_are_validated(planned: LakeTable, bad: dict) -> None:
    arguments = {"strategy": "sort", "sort_order": "event_ts ASC", **bad}
    with pytest.raises(ConfigError):
        planned.maintenance.rewrite_data_files(**arguments)
    assert planned.last_statement is None


def test_expiry_and_orphan_limits(planned: LakeTable) -> None:
    for retain_last in (0, -1, 1.5):
        with pytest.raises(ConfigError):
            planned.maintenance.expire_snapshots(MOMENT, retain_last=retain_last)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="older than"):
        planned.maintenance.remove_orphan_files(datetime.now(UTC) - timedelta(hours=1))
    with pytest.raises(ConfigError):
        planned.maintenance.remove_orphan_files(datetime(2020, 1, 1))  # naive
    assert planned.last_statement is None


def test_sort_order_is_normalised() -> None:
    assert sort_order_literal("event_type,event_ts desc nulls first") == "event_type ASC, event_ts DESC NULLS FIRST"
