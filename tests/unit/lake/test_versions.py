"""Version clauses and ref statements without a JVM: what reaches SQL is checked first."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from icestream.errors import ConfigError
from icestream.lake.table import LakeTable


@pytest.fixture
def planned() -> LakeTable:
    return LakeTable(None, "lake.ns.t", dry_run=True)  # type: ignore[arg-type]


def test_as_of_clauses(planned: LakeTable) -> None:
    versions = planned.versions
    assert versions.as_of() == "lake.ns.t"
    assert versions.as_of(42) == "lake.ns.t VERSION AS OF 42"
    assert versions.as_of("42") == "lake.ns.t VERSION AS OF 42"
    assert versions.as_of("audit") == "lake.ns.t VERSION AS OF 'audit'"
    moment = datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert versions.as_of(moment) == "lake.ns.t TIMESTAMP AS OF TIMESTAMP '1970-01-01 00:00:01+00:00'"
    later = datetime(2026, 11, 25, 10, 30, 0, 163000)  # naive: UTC, the one rule for naive datetimes
    assert versions.as_of(later) == "lake.ns.t TIMESTAMP AS OF TIMESTAMP '2026-11-25 10:30:00.163000+00:00'"
    for bad in ("main' OR '1'='1", "1 OR 1=1", 4.2):
        with pytest.raises(ConfigError):
            versions.as_of(bad)  # type: ignore[arg-type]


def test_ref_statements(planned: LakeTable) -> None:
    versions = planned.versions
    assert versions.create_tag("loaded", 7).statement.sql == (
        "ALTER TABLE lake.ns.t CREATE OR REPLACE TAG loaded AS OF VERSION 7"
    )
    assert versions.create_branch("audit").statement.sql == "ALTER TABLE lake.ns.t CREATE OR REPLACE BRANCH audit"
    assert versions.create_branch("audit", 7).statement.sql.endswith("BRANCH audit AS OF VERSION 7")
    assert versions.drop_ref("audit", "branch").statement.sql == "ALTER TABLE lake.ns.t DROP BRANCH IF EXISTS audit"
    assert versions.fast_forward("main", "audit").statement.sql == (
        "CALL lake.system.fast_forward(table => 'ns.t', branch => 'main', to => 'audit')"
    )
    assert versions.rollback_to_snapshot(7).statement.sql == (
        "CALL lake.system.rollback_to_snapshot(table => 'ns.t', snapshot_id => 7)"
    )
    assert all(statement.writes for statement in planned.statements)


def test_ref_arguments_are_checked(planned: LakeTable) -> None:
    versions = planned.versions
    with pytest.raises(ConfigError):
        versions.drop_ref("audit", "SNAPSHOT")
    with pytest.raises(ConfigError):
        versions.create_tag("x; DROP TABLE y", 7)
    with pytest.raises(ConfigError):
        versions.fast_forward("main", "audit'")
    with pytest.raises(ConfigError):
        versions.rollback_to_snapshot("7 OR 1=1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        versions.add_column("coupon", "STRUCT<a: INT>")
    assert planned.last_statement is None


def test_wap_branch_sets_and_resets_the_session_branch(planned: LakeTable) -> None:
    versions = planned.versions
    assert versions.enable_wap().statement.sql == (
        "ALTER TABLE lake.ns.t SET TBLPROPERTIES ('write.wap.enabled' = 'true')"
    )
    ran: list[str] = []
    planned.run = lambda statement: ran.append(statement.sql)  # type: ignore[method-assign]
    with pytest.raises(RuntimeError), versions.wap_branch("audit"):
        raise RuntimeError("a failed write")
    assert ran == ["SET spark.wap.branch = audit", "RESET spark.wap.branch"]
    with pytest.raises(ConfigError), versions.wap_branch("audit; --"):
        pass


def test_nearest_half_is_halfway_by_rows_not_by_commits(planned: LakeTable) -> None:
    # The run: two backlog batches hold nearly every row, two live ones add a few hundred.
    snapshots = pd.DataFrame(
        {"snapshot_id": [11, 12, 13, 14, 99], "total_records": [17_000, 34_000, 34_300, 34_500, 5]}
    )
    history = pd.DataFrame({"snapshot_id": [11, 12, 13, 99, 14], "is_current_ancestor": [True] * 3 + [False, True]})
    assert planned.versions.nearest_half(snapshots, history) == 11  # the middle commit (13) differs by 200 rows
    one = history.iloc[:1]
    with pytest.raises(ConfigError, match="at least two snapshots"):
        planned.versions.nearest_half(snapshots, one)
