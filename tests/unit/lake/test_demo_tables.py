"""A demo's tables without a JVM: the mark, the check before any drop, and the one-line error (issue 58)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from icestream.errors import ConfigError, TableOwnershipError
from icestream.lake.demo_tables import DEMO_PROPERTY, demo_mark, drop_demo_tables, unowned_tables


class Catalog:
    """Tables by name, each with its properties; ``DROP`` statements are kept, and run, in order."""

    def __init__(self, tables: dict[str, dict[str, str]]) -> None:
        self.tables = tables
        self.dropped: list[str] = []
        self.catalog = SimpleNamespace(tableExists=lambda name: name in self.tables)

    def sql(self, text: str, args: object = None) -> object:
        name = text.split()[-2] if text.endswith(" PURGE") else text.split()[-1]
        if text.startswith("SHOW TBLPROPERTIES"):
            rows = [SimpleNamespace(key=key, value=value) for key, value in self.tables[name].items()]
            return SimpleNamespace(collect=lambda: rows)
        assert text.startswith("DROP TABLE IF EXISTS"), text
        self.dropped.append(name)
        self.tables.pop(name, None)
        return SimpleNamespace(toPandas=pd.DataFrame)


MINE, USERS = "lake.ns.t_crash_demo", "lake.ns.t_crash_demo_rejects"


def test_the_mark_names_the_demo_and_is_an_identifier() -> None:
    assert demo_mark("crash_demo") == {DEMO_PROPERTY: "crash_demo"}
    with pytest.raises(ConfigError):
        demo_mark("x' = 'y")


def test_only_the_demos_own_tables_are_dropped() -> None:
    spark = Catalog({MINE: demo_mark("crash_demo"), USERS: demo_mark("crash_demo")})
    drop_demo_tables(spark, (MINE, USERS, "lake.ns.t_crash_demo_raw"), "crash_demo")  # type: ignore[arg-type]
    assert spark.dropped == [MINE, USERS, "lake.ns.t_crash_demo_raw"]  # IF EXISTS: a missing one is no matter


@pytest.mark.parametrize("properties", [{}, {"comment": "a user's"}, demo_mark("metrics_demo")])
def test_a_table_without_the_demos_mark_stops_the_demo_before_anything_is_dropped(properties) -> None:
    spark = Catalog({MINE: demo_mark("crash_demo"), USERS: properties})
    assert unowned_tables(spark, (MINE, USERS), "crash_demo") == [USERS]  # type: ignore[arg-type]
    with pytest.raises(TableOwnershipError) as raised:
        drop_demo_tables(spark, (MINE, USERS), "crash_demo")  # type: ignore[arg-type]
    assert spark.dropped == [], "the check comes before every drop, the demo's own tables' too"
    message = str(raised.value)
    assert len(message.splitlines()) == 1
    assert message.startswith(f"{USERS} exists but was not made by the crash_demo demo")
    assert "-p table NAME, or ICESTREAM_TABLE" in message


def test_the_error_is_a_config_error_so_the_cli_and_notebooks_show_its_message_alone() -> None:
    assert issubclass(TableOwnershipError, ConfigError)
