"""Every notebook follows docs/contributing.md: clean, parameterized, imports from icestream only."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

from icestream.workbook.runner import KERNEL_NAME, notebook_paths
from tests.helpers.spark_line import importable

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
def test_opens_on_the_projects_kernel(path: Path) -> None:
    """JupyterLab starts the kernel a notebook names: the project's, which `make setup` registers."""
    kernelspec = json.loads(path.read_text())["metadata"]["kernelspec"]
    assert kernelspec == {"name": KERNEL_NAME, "display_name": "Python (icestream)", "language": "python"}


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


# Every statement that reads or changes a table prints as it runs (icestream.lake.show_statements):
# a notebook that touches tables turns it on in its first cell after the imports, and no cell prints a
# recorded statement again by hand (it would show twice, or show the last of several reads only).
TOUCHES_TABLES = re.compile(r"\b(?:LakeTable|setup_tables|load_committed|duckdb_engine|pyiceberg_engine)\b")
PRINTS_AGAIN = re.compile(
    r"\.last_statement\b|for \w+ in (?:list\()?\w+\.statements\b|\.statements\)?\[|attrs\[\"scan\"\]"
)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_statements_print_as_they_run(path: Path) -> None:
    code = [source(cell) for cell in cells(path) if cell["cell_type"] == "code"]
    if not any(TOUCHES_TABLES.search(text) for text in code):
        return  # 01 sends to the stream and reads no table
    assert "show_statements" in code[1], f"{path.name}: the imports cell does not import show_statements"
    assert code[2].lstrip().startswith("show_statements()"), (
        f"{path.name}: its first cell does not call show_statements()"
    )
    again = [text[:120] for text in code if PRINTS_AGAIN.search(text)]
    assert again == [], f"{path.name}: cells print recorded statements by hand (they already print as they run)"


def test_the_statement_check_sees_a_print_by_hand() -> None:
    for text in ("print(table.last_statement)", "for statement in table.statements:", "print(*list(t.statements)[3:])",
                 'print(frame.attrs["scan"])'):  # fmt: skip
        assert PRINTS_AGAIN.search(text), text
    assert not PRINTS_AGAIN.search("as_of = events_table.versions.count_as_of(snapshot)")


# What notebooks may import from icestream: the package's faces (docs/design.md), each naming what it
# offers in __all__. A module behind a face may move; the face is what a learner copies into their code.
# At most six, so that a learner can guess which one holds a name.
MAX_FACES = 6
FACES = (
    "icestream",
    "icestream.kinesis",
    "icestream.lake",
    "icestream.queries",
    "icestream.plots",
    "icestream.demos",
)


def icestream_imports(code: str) -> list[tuple[str, str]]:
    """``(module, name)`` for each name the code imports from icestream (``import icestream.x``: name "")."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "icestream":
            found.extend((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, "") for alias in node.names if alias.name.split(".")[0] == "icestream")
    return found


def face_problems(imports: list[tuple[str, str]]) -> list[str]:
    """What in ``imports`` does not come from a face's ``__all__``."""
    problems = []
    for module, name in imports:
        if module not in FACES:
            problems.append(f"{name or module} from {module}: not a public face")
        elif name not in importlib.import_module(module).__all__:
            problems.append(f"{name} from {module}: not in its __all__")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_imports_come_from_the_public_faces_only(path: Path) -> None:
    code = [source(cell) for cell in cells(path) if cell["cell_type"] == "code"]
    imports = [found for text in code for found in icestream_imports(text)]
    assert imports, f"{path.name} imports nothing from icestream"
    assert not face_problems(imports), f"{path.name}: {face_problems(imports)}"


def test_the_notebooks_import_at_most_six_faces() -> None:
    imported = {module for path in NOTEBOOKS for cell in cells(path) if cell["cell_type"] == "code"
                for module, _ in icestream_imports(source(cell))}  # fmt: skip
    assert len(FACES) <= MAX_FACES
    assert imported <= set(FACES), f"notebooks import from what is not a face: {sorted(imported - set(FACES))}"
    assert len(imported) <= MAX_FACES, f"notebooks import {len(imported)} faces: {sorted(imported)}"


def test_an_import_from_behind_a_face_is_a_problem() -> None:
    imports = icestream_imports(
        "from icestream.lake.table import recreate_events_copy\n"
        "import icestream.queries.realtime\n"
        "from icestream.lake import LakeTable, no_such_name\n"
    )
    assert face_problems(imports) == [
        "recreate_events_copy from icestream.lake.table: not a public face",
        "icestream.queries.realtime from icestream.queries.realtime: not a public face",
        "no_such_name from icestream.lake: not in its __all__",
    ]


@pytest.mark.parametrize("face", FACES)
def test_every_name_a_face_offers_resolves(face: str) -> None:
    module = importlib.import_module(face)
    assert module.__all__, f"{face} offers nothing"
    offered = [name for name in module.__all__ if importable(module._FACE.defined_in.get(name, face))]  # 3.5: no source
    missing = [name for name in offered if not hasattr(module, name)]
    assert not missing, f"{face}.__all__ names what it does not have: {missing}"
