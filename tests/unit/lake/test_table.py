"""LakeTable without a JVM: the name is checked once, statements are recorded, a dry run runs nothing."""

from __future__ import annotations

import pytest

from icestream.errors import ConfigError
from icestream.lake.statement import Statement
from icestream.lake.table import STATEMENTS_KEPT, LakeTable


@pytest.mark.parametrize("name", ["lake.ns.t; DROP TABLE x", "t", "lake..t", "lake.ns.1t", "lake.ns.t'", ""])
def test_bad_names_are_refused_before_any_sql(name: str) -> None:
    with pytest.raises(ConfigError):
        LakeTable(None, name)  # type: ignore[arg-type]


def test_name_parts() -> None:
    table = LakeTable(None, "lake.streaming_analytics.user_events")  # type: ignore[arg-type]
    assert (table.catalog, table.identifier) == ("lake", "streaming_analytics.user_events")
    assert table.branch("audit") == "lake.streaming_analytics.user_events.branch_audit"
    with pytest.raises(ConfigError):
        table.branch("audit; --")
    assert repr(LakeTable(None, "lake.ns.t", dry_run=True)) == "LakeTable('lake.ns.t', dry_run=True)"  # type: ignore[arg-type]


def test_procedure_statement() -> None:
    table = LakeTable(None, "lake.ns.t")  # type: ignore[arg-type]
    statement = table.procedure("rewrite_manifests", use_caching="false")
    assert statement.sql == "CALL lake.system.rewrite_manifests(table => 'ns.t', use_caching => false)"
    assert statement.writes
    with pytest.raises(ConfigError):
        table.procedure("expire_snapshots); DROP TABLE x; --")


def test_dry_run_records_writes_without_a_session() -> None:
    table = LakeTable(None, "lake.ns.t", dry_run=True)  # type: ignore[arg-type]
    assert table.last_statement is None
    change = Statement("ALTER TABLE lake.ns.t ADD COLUMN c STRING", writes=True)
    outcome = table.apply(change)
    assert outcome.statement is change
    assert not outcome.ran
    assert list(table.statements) == [change]
    assert table.last_statement is change


def test_run_is_for_reads_only() -> None:
    table = LakeTable(None, "lake.ns.t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="apply"):
        table.run(Statement("DROP TABLE lake.ns.t", writes=True))
    assert table.last_statement is None


def test_the_statement_log_is_bounded() -> None:
    table = LakeTable(None, "lake.ns.t", dry_run=True)  # type: ignore[arg-type]
    for index in range(STATEMENTS_KEPT + 5):
        table.apply(Statement(f"ALTER TABLE lake.ns.t DROP TAG IF EXISTS t{index}", writes=True))
    assert len(table.statements) == STATEMENTS_KEPT
    assert table.statements[0].sql.endswith(" t5")


def test_a_dataframe_call_is_recorded_beside_the_statements() -> None:
    from icestream.lake.statement import DataFrameCall

    table = LakeTable(None, "lake.ns.t")  # type: ignore[arg-type]
    call = DataFrameCall('spark.read.format("iceberg").option("start-snapshot-id", "1").load("lake.ns.t")')
    table.record(call)
    assert table.last_statement is call
    assert str(table.last_statement) == call.code


@pytest.fixture
def statements_shown():
    from icestream.lake.statement import show_statements

    show_statements()
    yield
    show_statements(False)


def test_with_show_statements_each_statement_prints_as_it_is_recorded(statements_shown, capsys) -> None:
    from icestream.lake.statement import DataFrameCall

    table = LakeTable(None, "lake.ns.t", dry_run=True)  # type: ignore[arg-type]
    table.apply(table.procedure("rewrite_manifests"))
    table.record(DataFrameCall("spark.read.option('start-snapshot-id', '1').table('lake.ns.t')"))
    assert capsys.readouterr().out == (
        "CALL lake.system.rewrite_manifests(table => 'ns.t')\n\n"
        "spark.read.option('start-snapshot-id', '1').table('lake.ns.t')\n\n"
    )


def test_a_quiet_table_and_the_default_print_nothing(statements_shown, capsys) -> None:
    quiet = LakeTable(None, "lake.ns.t", dry_run=True, echo=False)  # type: ignore[arg-type]
    quiet.apply(quiet.procedure("rewrite_manifests"))
    assert capsys.readouterr().out == ""
    assert len(quiet.statements) == 1  # still recorded


def test_statements_are_not_shown_unless_asked(capsys) -> None:
    table = LakeTable(None, "lake.ns.t", dry_run=True)  # type: ignore[arg-type]
    table.apply(table.procedure("rewrite_manifests"))
    assert capsys.readouterr().out == ""
