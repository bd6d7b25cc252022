"""Set-up without a JVM: the statements it runs, recorded by each table, and properties made readable."""

from __future__ import annotations

from typing import Any

from icestream.config import load_settings
from icestream.lake.ddl import readable_property, setup_tables
from icestream.lake.statement import Statement
from icestream.lake.table import LakeTable, setup_lake_tables


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def collect(self) -> list[Any]:
        return self.rows

    def toPandas(self) -> Any:  # noqa: N802 - Spark's name
        import pandas as pd

        return pd.DataFrame()


class _Session:
    """Answers SHOW TBLPROPERTIES with no properties, so set-up also sets them."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def sql(self, sql: str, args: Any = None) -> _Rows:
        self.ran.append(sql)
        return _Rows([])


def test_setup_runs_create_if_not_exists_through_the_runner() -> None:
    settings = load_settings(profile="local")
    seen: list[tuple[str, Statement]] = []

    def run(name: str, statement: Statement) -> _Rows:
        seen.append((name, statement))
        return _Rows([])

    names = setup_tables(None, settings, run)  # type: ignore[arg-type]
    assert names == [settings.table_name, settings.rejects_table_name]
    creates = [statement.sql for _, statement in seen if statement.sql.startswith("CREATE TABLE")]
    assert [sql.split()[5] for sql in creates] == names
    assert all(sql.startswith("CREATE TABLE IF NOT EXISTS") for sql in creates)
    assert "PARTITIONED BY (hours(event_ts))" in creates[0]


def test_each_table_records_the_statements_that_ran_on_it() -> None:
    session = _Session()
    events, rejects = setup_lake_tables(session, load_settings(profile="local"))  # type: ignore[arg-type]
    assert isinstance(events, LakeTable)
    kinds = [statement.sql.split("(")[0].split()[0:2] for statement in events.statements]
    assert kinds == [["CREATE", "NAMESPACE"], ["CREATE", "TABLE"], ["SHOW", "TBLPROPERTIES"], ["ALTER", "TABLE"]]
    assert rejects.statements[0].sql.startswith(f"CREATE TABLE IF NOT EXISTS {rejects.name}")
    assert session.ran == [str(statement) for table in (events, rejects) for statement in table.statements]


def test_properties_read_as_a_person_expects() -> None:
    assert readable_property("icestream.source-stream-created", "1795566376.452") == ("2026-11-25 00:26:16 UTC")
    assert readable_property("current-snapshot-id", "none") == "none (nothing committed yet)"
    assert readable_property("format-version", "2") == "2"
