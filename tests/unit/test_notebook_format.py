"""Every notebook follows docs/contributing.md: clean, parameterized, imports from icestream only."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from icestream.operations.runner import notebook_paths

pytestmark = pytest.mark.unit

NOTEBOOKS = notebook_paths()


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_name_sorts_into_run_order(path: Path) -> None:
    assert re.fullmatch(r"\d\d_[a-z0-9]+(_[a-z0-9]+)*\.ipynb", path.name)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_committed_without_outputs(path: Path) -> None:
    for cell in cells(path):
        if cell["cell_type"] == "code":
            hint = f"{path.name} was saved with outputs ({source(cell)[:40]!r}...): run `make clear-outputs`"
            assert cell.get("outputs") == [], hint
            assert cell.get("execution_count") is None, hint


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_title_prerequisites_then_parameters(path: Path) -> None:
    first, second = cells(path)[:2]
    assert first["cell_type"] == "markdown"
    assert source(first).startswith("# ")
    assert "## Prerequisites" in source(first)
    assert second["cell_type"] == "code"
    assert "parameters" in second["metadata"].get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_parameters_are_typed_literals_with_comments(path: Path) -> None:
    parameters = source(cells(path)[1])
    tree = ast.parse(parameters)
    for statement in tree.body:
        assert isinstance(statement, ast.AnnAssign), ast.unparse(statement)
        assert statement.value is not None
        ast.literal_eval(statement.value)  # a literal, not an expression
    for line in parameters.splitlines():
        if line.strip():
            assert "  # " in line, f"parameter without a comment: {line}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_no_magics_that_hide_code(path: Path) -> None:
    for cell in cells(path):
        text = source(cell)
        if cell["cell_type"] == "code":
            for magic in ("%run", "%%file", "%%writefile"):
                assert magic not in text


# Iceberg operations a notebook teaches: where one runs, the cell prints the SQL it ran.
TAUGHT = re.compile(
    r"\.(?:inspect|versions|maintenance)\.(snapshots|history|files|data_files|partitions|manifests|refs|"
    r"counts_by_type|create_tag|create_branch|drop_ref|fast_forward|rollback_to_snapshot|add_column|"
    r"rewrite_data_files|rewrite_manifests|expire_snapshots|remove_orphan_files)\("
)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_every_iceberg_operation_taught_shows_its_sql(path: Path) -> None:
    for cell in cells(path):
        text = source(cell)
        if cell["cell_type"] != "code" or text.lstrip().startswith("assert") or "\nassert " in text:
            continue  # the checks cells re-ask what earlier cells showed
        taught = TAUGHT.findall(text)
        if taught:
            assert "last_statement" in text, f"{path.name}: {taught} runs SQL the cell does not show:\n{text[:200]}"
