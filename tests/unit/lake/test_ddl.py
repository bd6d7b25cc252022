"""Set-up without a JVM: the statements it runs, recorded by each table, a table's DDL, and properties made readable."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from icestream.config import load_settings
from icestream.lake.ddl import readable_property
from icestream.lake.table import LakeTable, setup_tables


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def collect(self) -> list[Any]:
        return self.rows

    def first(self) -> Any:
        return self.rows[0] if self.rows else None

    def toPandas(self) -> Any:  # noqa: N802 - Spark's name
        import pandas as pd

        return pd.DataFrame()


class _Session:
    """Answers every statement with ``rows`` (none: SHOW TBLPROPERTIES finds none, so set-up also sets them)."""

    def __init__(self, rows: list[Any] | None = None) -> None:
        self.ran: list[str] = []
        self.rows = rows or []

    def sql(self, sql: str, args: Any = None) -> _Rows:
        self.ran.append(sql)
        return _Rows(self.rows)


def test_setup_creates_each_table_if_it_does_not_exist() -> None:
    settings = load_settings(profile="local")
    session = _Session()
    names = [table.name for table in setup_tables(session, settings)]  # type: ignore[arg-type]
    assert names == [settings.table_name, settings.rejects_table_name]
    creates = [sql for sql in session.ran if sql.startswith("CREATE TABLE")]
    assert [sql.split()[5] for sql in creates] == names
    assert all(sql.startswith("CREATE TABLE IF NOT EXISTS") for sql in creates)
    assert "PARTITIONED BY (hours(event_ts))" in creates[0]


def test_each_table_records_the_statements_that_ran_on_it() -> None:
    session = _Session()
    events, rejects = setup_tables(session, load_settings(profile="local"))  # type: ignore[arg-type]
    assert isinstance(events, LakeTable)
    kinds = [statement.sql.split("(")[0].split()[0:2] for statement in events.statements]
    assert kinds == [["CREATE", "NAMESPACE"], ["CREATE", "TABLE"], ["SHOW", "TBLPROPERTIES"], ["ALTER", "TABLE"]]
    assert rejects.statements[0].sql.startswith(f"CREATE TABLE IF NOT EXISTS {rejects.name}")
    assert session.ran == [str(statement) for table in (events, rejects) for statement in table.statements]


def test_properties_read_as_a_person_expects() -> None:
    assert readable_property("icestream.source-stream-created", "1795566376.452") == ("2026-11-25 00:26:16 UTC")
    assert readable_property("current-snapshot-id", "none") == "none (nothing committed yet)"
    assert readable_property("format-version", "2") == "2"


def test_a_table_shows_its_ddl_as_a_recorded_statement() -> None:
    ddl = "CREATE TABLE lake.ns.clicks (event_id STRING) USING iceberg PARTITIONED BY (hours(event_ts))"
    table = LakeTable(_Session([(ddl,)]), "lake.ns.clicks")  # type: ignore[arg-type]
    assert table.show_create() == ddl
    assert table.last_statement is not None
    assert table.last_statement.sql == "SHOW CREATE TABLE lake.ns.clicks"


def test_a_tables_properties_read_as_a_person_expects_when_asked() -> None:
    rows = [SimpleNamespace(key="current-snapshot-id", value="none"), SimpleNamespace(key="format-version", value="2")]
    table = LakeTable(_Session(rows), "lake.ns.clicks")  # type: ignore[arg-type]
    assert table.inspect.properties() == {"current-snapshot-id": "none", "format-version": "2"}
    assert table.inspect.properties(readable=True) == {
        "current-snapshot-id": "none (nothing committed yet)",
        "format-version": "2",
    }
