"""Scheduled maintenance without a table: ages, steps, the plan, and a dry run's statements."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from icestream.cli import main
from icestream.errors import ConfigError
from icestream.lake.routine import (
    STEPS,
    MaintenancePlan,
    parse_age,
    parse_steps,
    results_frame,
    run_maintenance,
    start_of_hour,
)
from icestream.lake.table import LakeTable

NOW = datetime(2026, 11, 19, 13, 5, 7, tzinfo=UTC)


def test_ages_and_steps_parse() -> None:
    assert parse_age("3d") == timedelta(days=3)
    assert parse_age("36h") == timedelta(hours=36)
    assert parse_age("1.5w") == timedelta(weeks=1.5)
    assert parse_steps("expire, compact") == ("compact", "expire")  # always in the fixed order
    for bad in ("3", "3 days", "-1d", ""):
        with pytest.raises(ConfigError):
            parse_age(bad)
    with pytest.raises(ConfigError, match="choose from compact, manifests, expire, orphans"):
        parse_steps("compact,vacuum")


def test_the_scheduled_plan_compacts_closed_hours_and_keeps_iceberg_ages() -> None:
    plan = MaintenancePlan.scheduled("user-events", now=NOW)
    assert plan.compact_before == start_of_hour(NOW) == datetime(2026, 11, 19, 13, 0, tzinfo=UTC)
    assert plan.expire_before == NOW - timedelta(days=5)
    assert plan.orphans_before == NOW - timedelta(days=3)
    assert plan.keep_positions_of == "user-events"
    assert plan.steps == STEPS
    with pytest.raises(ConfigError, match="at least 1 day"):
        MaintenancePlan.scheduled("user-events", now=NOW, orphan_age=timedelta(hours=23))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retain_last": 0}, "retain_last 0: keep at least 1 snapshot"),
        ({"steps": ("compact", "vacuum")}, "maintenance step 'vacuum': choose from compact"),
    ],
)
def test_a_plan_with_a_bad_step_argument_is_refused_when_made(options: dict[str, object], message: str) -> None:
    # Checked when the plan is made, not when its step comes: the steps before it would have run.
    with pytest.raises(ConfigError, match=message):
        MaintenancePlan.scheduled("user-events", now=NOW, **options)


class DescribeOnly:
    """A session that answers only ``DESCRIBE TABLE`` (of a table partitioned by ``hours(event_ts)``) and the
    count of its delete files (none)."""

    def sql(self, text: str, args: object = None) -> SimpleNamespace:
        if text.endswith(".delete_files"):
            return SimpleNamespace(first=lambda: SimpleNamespace(n=0))
        assert text.startswith("DESCRIBE TABLE "), text
        rows = [SimpleNamespace(col_name="event_ts", data_type="timestamp"), SimpleNamespace(col_name="# Partitioning",
                data_type=""), SimpleNamespace(col_name="Part 0", data_type="hours(event_ts)")]  # fmt: skip
        return SimpleNamespace(collect=lambda: rows)


def test_a_dry_run_plans_the_four_calls_and_runs_nothing() -> None:
    # A dry run reads (the table's time column) but runs nothing that changes it.
    table = LakeTable(DescribeOnly(), "lake.ns.t", dry_run=True)  # type: ignore[arg-type]
    plan = MaintenancePlan.scheduled(None, now=datetime.now(UTC))
    lines: list[str] = []
    results = run_maintenance(table, plan, on_step=lambda result: lines.append(result.line()))
    assert [result.step for result in results] == list(STEPS)
    assert all(result.ok and not result.outcome.ran and result.changed == {} for result in results)
    calls = [result.outcome.statement.sql for result in results]
    hour = f"{plan.compact_before:%Y-%m-%d %H}:00:00+00:00"
    assert calls[0] == (
        "CALL lake.system.rewrite_data_files(table => 'ns.t', strategy => 'binpack', "
        f"options => map('min-input-files', '2'), where => \"event_ts < TIMESTAMP '{hour}'\")"
    )
    assert calls[1] == "CALL lake.system.rewrite_manifests(table => 'ns.t')"
    assert calls[2].startswith("CALL lake.system.expire_snapshots(table => 'ns.t', older_than => TIMESTAMP")
    assert calls[3].endswith("dry_run => false, prefix_listing => true)")
    assert [line.split()[0] for line in lines] == list(STEPS)
    assert all("planned (dry run)" in line for line in lines)


def test_a_step_run_without_an_argument_its_iceberg_lacks_says_so_in_its_line() -> None:
    from icestream.lake.maintenance import Maintenance

    table = LakeTable(DescribeOnly(), "lake.ns.t", dry_run=True)  # type: ignore[arg-type]
    table.maintenance = Maintenance(table, "1.7.1")  # Glue 5.0's and EMR 7.8's Iceberg
    plan = MaintenancePlan.scheduled(None, now=datetime.now(UTC), steps=("manifests", "orphans"))
    manifests, orphans = run_maintenance(table, plan)
    assert "prefix_listing" not in orphans.outcome.statement.sql
    assert orphans.note == (
        "without prefix_listing (Iceberg 1.10.0; this session has 1.7.1): files are listed through Hadoop's "
        "FileSystem (EMR and Glue provide s3://)"
    )
    assert f"({orphans.note})" in orphans.line()
    assert manifests.note == "", "only the step that fell back says so"
    assert "without" not in manifests.line()


def test_a_failing_step_is_reported_and_the_others_still_run() -> None:
    table = LakeTable(None, "lake.ns.t")  # type: ignore[arg-type] - not a dry run: running fails at once
    plan = MaintenancePlan.scheduled(None, now=datetime.now(UTC), steps=("manifests", "orphans"))
    results = run_maintenance(table, plan)
    assert [result.step for result in results] == ["manifests", "orphans"]
    assert not any(result.ok for result in results)
    assert results[0].outcome.statement.sql == "CALL lake.system.rewrite_manifests(table => 'ns.t')"
    assert results[0].line().startswith("manifests  FAILED: ")
    assert "\n" not in results[0].error
    frame = results_frame(results)
    assert list(frame.index) == ["manifests", "orphans"]
    assert list(frame.columns) == ["seconds", "error"]
    assert frame["error"].str.len().gt(0).all()


def test_cli_refuses_an_orphan_age_below_a_day(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["maintain", "--dry-run", "--orphans-older-than", "2h"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: orphan age 2:00:00: at least 1 day")
    assert error.count("\n") == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--retain-last", "0"], "error: --retain-last 0: keep at least 1 snapshot"),
        (["--retain-last", "-2"], "error: --retain-last -2: keep at least 1 snapshot"),
        (["--archive-retention-days", "0"], "error: --archive-retention-days 0: keep at least 1 day"),
    ],
)
def test_cli_refuses_a_bad_step_argument_before_the_first_step_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    # Issue 58: --retain-last 0 failed in the expire step, after compaction had rewritten the table.
    from icestream.runtime import spark

    started: list[str] = []

    def no_session(*args: object, **kwargs: object) -> None:
        started.append("spark")
        raise AssertionError("the session started: a step could run")

    monkeypatch.setattr(spark, "prepare_runtime", no_session)
    assert main(["maintain", *arguments]) == 2
    error = capsys.readouterr().err
    assert (started, error.count("\n")) == ([], 1), error
    assert error.startswith(message), error
