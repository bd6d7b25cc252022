"""The public faces (docs/design.md): what each offers is listed there, used somewhere, offered once, and cheap.

A face is a package whose ``__all__`` says what notebooks, scripts and schedulers may import from it
(:mod:`icestream.face`). The table in docs/design.md is what a learner reads; these tests keep it equal
to the faces, and keep every name a face offers in use by a notebook, a bench script or an example
in the docs, so that a face never grows names nobody imports.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.spark_line import importable

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
FACES = ("icestream", "icestream.kinesis", "icestream.lake", "icestream.queries", "icestream.plots", "icestream.demos")
# What a face must never load when imported: Spark executors and child processes import icestream.
HEAVY = ("pyspark", "pandas", "duckdb", "pyiceberg", "matplotlib", "boto3", "moto")


def design_table(text: str) -> dict[str, list[str]]:
    """Face -> names, read from the table under docs/design.md's "## Public faces"."""
    section = text.split("\n## Public faces\n", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and re.fullmatch(r"`icestream(\.\w+)?`", cells[0]):
            table[cells[0].strip("`")] = re.findall(r"`([^`]+)`", cells[1])
    return table


def test_the_design_table_lists_each_face_and_its_names() -> None:
    table = design_table(DESIGN.read_text())
    assert list(table) == list(FACES), "docs/design.md's table of faces names other faces (or another order)"
    for face in FACES:
        assert table[face] == sorted(importlib.import_module(face).__all__), f"docs/design.md's row of {face}"


def test_the_design_table_is_read_row_by_row_within_its_section() -> None:
    text = ("# Design\n\n## Public faces\n\n| face | names |\n|---|---|\n"
            "| `icestream` | `get_spark`, `load_settings` |\n\n## Next\n\n| `icestream.lake` | `X` |\n")  # fmt: skip
    assert design_table(text) == {"icestream": ["get_spark", "load_settings"]}


def offered_twice(offers: dict[str, list[str]]) -> dict[str, list[str]]:
    """Name -> the faces that offer it, for each name that more than one face offers."""
    offered: dict[str, list[str]] = {}
    for face, names in offers.items():
        for name in names:
            offered.setdefault(name, []).append(face)
    return {name: faces for name, faces in offered.items() if len(faces) > 1}


def test_each_name_is_offered_by_one_face_only() -> None:
    twice = offered_twice({face: importlib.import_module(face).__all__ for face in FACES})
    assert not twice, f"names offered by more than one face: {twice}"


def test_the_check_sees_a_name_offered_twice() -> None:
    offers = {"icestream": ["start_ingest"], "icestream.lake": ["LakeTable"], "icestream.demos": ["start_ingest"]}
    assert offered_twice(offers) == {"start_ingest": ["icestream", "icestream.demos"]}


def imported_names(code: str) -> set[tuple[str, str]]:
    """``(face, name)`` for each ``from icestream... import name`` in the code."""
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "icestream":
            found.update((node.module, alias.name) for alias in node.names)
    return found


def used_names() -> set[tuple[str, str]]:
    """What notebooks, bench scripts, job entry points and the docs' examples import from icestream."""
    used: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                code = "\n".join(line for line in "".join(cell["source"]).splitlines()
                                 if not line.lstrip().startswith(("%", "!")))  # fmt: skip
                used |= imported_names(code)
    for path in [*(ROOT / "bench").glob("*.py"), *(ROOT / "lib" / "icestream" / "jobs").glob("*.py")]:
        used |= imported_names(path.read_text())
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for block in re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL):
            used |= imported_names(block)
    return used


def test_every_name_a_face_offers_is_used() -> None:
    used = used_names()
    unused = [f"{face}.{name}" for face in FACES for name in importlib.import_module(face).__all__
              if (face, name) not in used]  # fmt: skip
    assert not unused, f"offered but imported by no notebook, bench script, job or docs example: {unused}"


def test_importing_every_face_loads_no_heavy_library() -> None:
    code = f"import json, sys\nfor face in {FACES!r}: __import__(face)\nprint(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    heavy = sorted({name.split(".")[0] for name in loaded if name.split(".")[0] in HEAVY})
    assert not heavy, f"importing the faces loaded {heavy}"


@pytest.mark.parametrize("face", FACES)
def test_importing_a_name_from_a_face_gives_what_its_module_defines(face: str) -> None:
    # Importing a module binds its name on its package: a function the face offers under the name of
    # one of the package's modules (crash_demo from a module crash_demo) becomes that module once either is imported.
    table = importlib.import_module(face)._FACE
    for name, module in table.defined_in.items():
        if not importable(module):
            continue  # the kinesis source on Spark 3.5
        imported: dict[str, object] = {}
        exec(f"from {face} import {name}", imported)  # noqa: S102 (a name from the face's own table)
        assert imported[name] is getattr(importlib.import_module(module), name), f"{face}.{name} is not {module}.{name}"


@pytest.mark.parametrize("face", FACES)
def test_a_face_names_what_it_offers_in_dir(face: str) -> None:
    module = importlib.import_module(face)
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018
