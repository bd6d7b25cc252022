"""Maintenance calls written for each platform's Iceberg (icestream.runtime.platforms drives them)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from icestream.errors import ConfigError
from icestream.lake.maintenance import REQUIRES, Maintenance
from icestream.lake.table import LakeTable
from icestream.runtime.platforms import PLATFORMS, at_least, find_platform

MOMENT = datetime(2026, 11, 19, 13, 5, 7, tzinfo=UTC)


def planned(iceberg: str | None) -> Maintenance:
    return Maintenance(LakeTable(None, "lake.ns.t", dry_run=True), iceberg)  # type: ignore[arg-type]


@pytest.mark.parametrize("platform", PLATFORMS, ids=lambda row: f"{row.service}-{row.release}")
def test_orphan_listing_matches_the_platforms_iceberg(platform) -> None:
    sql = planned(platform.iceberg).remove_orphan_files(MOMENT, delete=True).statement.sql
    assert ("prefix_listing => true" in sql) is at_least(
        platform.iceberg, REQUIRES["remove_orphan_files"]["prefix_listing"]
    )
    assert "older_than => TIMESTAMP '2026-11-19 13:05:07+00:00', dry_run => false" in sql


def test_iceberg_1_7_platform_falls_back_and_1_10_lists_by_prefix() -> None:
    glue_5_0, glue_5_1 = find_platform("glue", "glue-5.0"), find_platform("glue", "glue-5.1")
    assert not planned(glue_5_0.iceberg).remove_orphan_files(MOMENT).statement.sql.count("prefix_listing")
    assert (
        planned(glue_5_1.iceberg)
        .remove_orphan_files(MOMENT)
        .statement.sql.endswith("dry_run => true, prefix_listing => true)")
    )


@pytest.mark.parametrize("platform", PLATFORMS, ids=lambda row: f"{row.service}-{row.release}")
def test_every_other_call_is_unchanged_on_every_platform(platform) -> None:
    newest, theirs = planned(None), planned(platform.iceberg)
    assert (
        theirs.rewrite_data_files(before=MOMENT).statement.sql == newest.rewrite_data_files(before=MOMENT).statement.sql
    )
    assert theirs.rewrite_manifests().statement.sql == newest.rewrite_manifests().statement.sql
    assert (
        theirs.expire_snapshots(MOMENT, retain_last=3).statement.sql
        == newest.expire_snapshots(MOMENT, retain_last=3).statement.sql
    )


def test_an_iceberg_without_the_procedure_says_so_in_one_line() -> None:
    with pytest.raises(
        ConfigError, match=r"^rewrite_data_files needs Iceberg 0\.13\.0; this session has Iceberg 0\.12\.1\.$"
    ):
        planned("0.12.1").rewrite_data_files()
