"""00's CREATE TABLE cells say what the library runs: one source of truth for the tables' DDL.

Notebook 00 holds the events and rejects tables' ``CREATE TABLE IF NOT EXISTS`` as statements a
learner edits and runs; ``icestream setup`` and 02 run :mod:`icestream.lake.ddl`'s. Each cell's
f-string is evaluated with the settings' names and compared, whitespace aside, with the library's.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable

import pytest

from icestream.config import Settings, load_settings
from icestream.lake.ddl import events_table_statement, rejects_table_statement
from icestream.lake.statement import Statement
from icestream.workbook.runner import notebook_paths


def spark_sql_texts(settings: Settings) -> list[str]:
    """Every ``spark.sql(f"...")`` statement in 00's code cells, rendered with ``settings``."""
    setup = next(path for path in notebook_paths() if path.name == "00_setup.ipynb")
    names = {
        "settings": settings,
        "events_table": settings.table_name,
        "rejects_table": settings.rejects_table_name,
    }
    texts = []
    for cell in json.loads(setup.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            is_sql = isinstance(node, ast.Call) and ast.unparse(node.func) == "spark.sql"
            if is_sql and node.args and isinstance(node.args[0], ast.JoinedStr | ast.Constant):
                texts.append(eval(compile(ast.Expression(node.args[0]), "00_setup", "eval"), {}, names))  # noqa: S307
    return texts


def normalized(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


@pytest.mark.parametrize("statement", [events_table_statement, rejects_table_statement])
@pytest.mark.parametrize("stream_name", ["user-events", "demo-two"])
def test_each_create_table_cell_is_the_librarys_statement(
    statement: Callable[[Settings], Statement], stream_name: str
) -> None:
    settings = load_settings(stream_name=stream_name, table="events_x")
    library = normalized(statement(settings).sql)
    in_cells = [normalized(text) for text in spark_sql_texts(settings)]
    assert library in in_cells, f"00 has no cell whose statement is {library[:80]}..."
