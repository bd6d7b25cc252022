"""04 and 05 teach their statements in their cells (CONVENTIONS rule 8), and 04 leaves the session writing main.

The statements 04 (time travel) and 05 (schema and partition evolution) are about are typed in
``spark.sql(...)`` calls a learner edits, not hidden in a helper; a cell that sets
``spark.wap.branch`` unsets it in a ``finally``, since later cells and notebooks sharing the Spark
session would otherwise write to the branch.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.helpers.notebook_code import code_cells, spark_sql_texts

TAUGHT = (
    (r"VERSION AS OF \{before_id\}", "04_time_travel.ipynb"),
    (r"TIMESTAMP AS OF '", "04_time_travel.ipynb"),
    (r"CREATE OR REPLACE TAG", "04_time_travel.ipynb"),
    (r"CREATE OR REPLACE BRANCH", "04_time_travel.ipynb"),
    (r"system\.fast_forward\(", "04_time_travel.ipynb"),
    (r"system\.rollback_to_snapshot\(", "04_time_travel.ipynb"),
    (r"ADD PARTITION FIELD bucket\(", "05_schema_evolution.ipynb"),
    (r"ADD COLUMN \{column\}", "05_schema_evolution.ipynb"),
    (r"RENAME COLUMN session_id", "05_schema_evolution.ipynb"),
    (r"ALTER COLUMN \{number\} TYPE BIGINT", "05_schema_evolution.ipynb"),
)


@pytest.mark.parametrize(("pattern", "notebook"), TAUGHT)
def test_each_taught_statement_is_typed_in_a_spark_sql_cell(pattern: str, notebook: str) -> None:
    assert any(re.search(pattern, text) for text in spark_sql_texts(notebook)), (notebook, pattern)


def test_the_incremental_read_is_the_dataframe_call_itself() -> None:
    source = [ast.unparse(tree) for tree in code_cells("04_time_travel.ipynb")]
    assert any("option('start-snapshot-id'" in text and "option('end-snapshot-id'" in text for text in source)


def test_a_wap_branch_set_in_a_cell_is_unset_in_its_finally() -> None:
    sets = 0
    for tree in code_cells("04_time_travel.ipynb"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node).startswith("spark.conf.set('spark.wap.branch'"):
                sets += 1
                unsets = [
                    statement
                    for block in ast.walk(tree)
                    if isinstance(block, ast.Try)
                    for statement in block.finalbody
                    if ast.unparse(statement) == "spark.conf.unset('spark.wap.branch')"
                ]
                assert unsets, "spark.wap.branch is set without an unset in a finally"
    assert sets >= 1
