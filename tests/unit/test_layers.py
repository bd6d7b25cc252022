"""The package's architecture, checked: imports follow the layers in docs/design.md.

Every import of an ``icestream`` module, wherever it is written (module level or inside a function),
must name a module of the same layer or a layer above; type-only imports (under ``TYPE_CHECKING``)
are exempt, since they never run. The runtime import graph must have no cycle, between files or
between folders. (No line cap: modules are split by concept, and ruff format decides their layout.)
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from icestream.face import Face

PACKAGE = Path(__file__).resolve().parents[2] / "lib" / "icestream"

# Foundation first, as in docs/design.md: a module imports from its own layer or an earlier one; a
# package ("lake") covers every module inside it. The folders follow the data's way (the sources,
# kinesis and kafka beside it, neither importing the other -> ingest
# and file_load -> lake -> queries), except that the lake sits below the ingest here: the ingest writes
# tables through the lake, and the lake knows nothing of Kinesis. The workbook's scenarios (demos)
# sit above everything they drive and check, so nothing below them can reach them.
LAYERS = (
    ("errors", "limits", "timestamps", "validation", "stack", "config", "face"),
    ("runtime",),
    ("kinesis", "kafka"),
    ("lake",),
    ("ingest",),
    ("kinesis_source",),
    ("file_load",),
    ("synthetic", "producer"),
    ("queries",),
    ("demos",),
    ("plots", "workbook", "deploy"),
    ("cli", "jobs"),
)
# What a scheduled job is made of (maintenance is lake/routine and lake/maintenance): these rooms may
# never import the workbook's scenarios, directly or through another module.
JOB_CORE = (
    "errors",
    "limits",
    "timestamps",
    "validation",
    "stack",
    "config",
    "face",
    "runtime",
    "kinesis",
    "ingest",
    "file_load",
    "lake",
)


def layer_of(module: str) -> int:
    """The layer of ``icestream.a.b`` (by its first part below the package)."""
    first = module.split(".")[1] if "." in module else ""
    for number, names in enumerate(LAYERS):
        if first in names:
            return number
    raise AssertionError(f"{module} is in no layer: add it to docs/design.md and to LAYERS")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path) -> set[str]:
    """``icestream`` modules imported by the file, skipping ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("icestream"):
            modules = [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(
                name
                if (PACKAGE.parent / name.replace(".", "/")).with_suffix(".py").exists()
                or (PACKAGE.parent / name.replace(".", "/")).is_dir()
                else node.module
                for name in modules
            )
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("icestream"))
    return {name for name in found if name != "icestream"}


SOURCES = sorted(PACKAGE.rglob("*.py"))
GRAPH = {module_name(path): runtime_imports(path) for path in SOURCES}


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_imports_come_from_the_same_layer_or_above(path: Path) -> None:
    name = module_name(path)
    if name == "icestream":
        return
    upward = [imported for imported in GRAPH[name] if layer_of(imported) > layer_of(name)]
    assert not upward, f"{name} (layer {layer_of(name) + 1}) imports from a lower layer: {upward}"


FACES = [module_name(path) for path in SOURCES if path.name == "__init__.py" and "_FACE = Face(" in path.read_text()]


def face_problems(face: str, table: Face) -> list[str]:
    """What in a face's table names a module of a lower layer, or no module at all."""
    named = [*table.defined_in.values(), *(f"{face}.{module}" for module in table.modules)]
    problems = [f"{module}: no such module" for module in named if module not in GRAPH]
    if face != "icestream":  # the package's own face offers the job, from every layer it needs
        problems += [
            f"{module}: a lower layer" for module in named if module in GRAPH and layer_of(module) > layer_of(face)
        ]
    return problems


@pytest.mark.parametrize("face", FACES)
def test_a_face_offers_names_from_its_layer_or_above(face: str) -> None:
    # A face names its modules as text (icestream.face): the import check above cannot see them.
    table = importlib.import_module(face)._FACE
    assert table.names, f"{face} offers nothing"
    assert not face_problems(face, table), f"{face}: {face_problems(face, table)}"


def test_the_face_check_sees_a_name_from_a_lower_layer() -> None:
    table = Face(
        "icestream.lake",
        {"LakeTable": "icestream.lake.table", "this_run": "icestream.demos.run_scope"},
        modules=("no_such_module",),
    )
    assert face_problems("icestream.lake", table) == [
        "icestream.lake.no_such_module: no such module",
        "icestream.demos.run_scope: a lower layer",
    ]


def test_the_job_core_never_imports_the_demos() -> None:
    # LAYERS already forbids it (demos sits above every job-core room); said here by name, so that a
    # reorder of LAYERS that let the core reach the demos fails on its own line.
    assert all(layer_of(f"icestream.{room}") < layer_of("icestream.demos") for room in JOB_CORE)
    core = [name for name in GRAPH if name != "icestream" and name.split(".")[1] in JOB_CORE]
    assert len(core) > 50, "the job core's modules were not found"
    reaching = sorted(
        f"{name} -> {reached}" for name in core for reached in reachable(name) if reached.startswith("icestream.demos")
    )
    assert not reaching, f"the job core imports the workbook's scenarios: {reaching}"


def assert_no_cycle(graph: dict[str, set[str]], what: str) -> None:
    """Fails with the first cycle found in ``graph`` (name -> the names it imports)."""
    visiting: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        assert name not in visiting, f"{what} cycle: " + " -> ".join([*visiting[visiting.index(name) :], name])
        visiting.append(name)
        for imported in graph.get(name, ()):
            if imported in graph and not name.startswith(imported + "."):  # a package's own __init__ is not a cycle
                visit(imported)
        visiting.pop()
        done.add(name)

    for name in graph:
        visit(name)


def test_the_import_graph_has_no_cycle() -> None:
    assert_no_cycle(GRAPH, "import")


def test_no_two_folders_import_each_other() -> None:
    # Within one layer two folders may import each other file by file without a file cycle (cli/ship.py
    # imported jobs/, jobs/ingest.py imported cli/); then neither folder is the one above.
    folders: dict[str, set[str]] = {}
    for name, imports in GRAPH.items():
        if "." in name:
            folder = name.split(".")[1]
            folders.setdefault(folder, set()).update(imported.split(".")[1] for imported in imports)
    assert_no_cycle({folder: imported - {folder} for folder, imported in folders.items()}, "folder import")


# What a scheduled job runs, and what only the workbook uses: a job's imports must never reach the
# workbook's folders, so that a slim install for jobs can leave them (and their libraries) out. Nor the
# deployment: a person runs it to make the stack and upload the job; the job itself never needs it.
JOB_ENTRY_POINTS = (
    "icestream.jobs.ingest",
    "icestream.cli.ingest_command",
    "icestream.cli.load_command",
    "icestream.cli.maintain",
)
WORKBOOK_ONLY = ("synthetic", "producer", "queries", "demos", "plots", "workbook")
DEPLOY_ONLY = ("deploy",)


def reachable(start: str) -> set[str]:
    """Every icestream module ``start`` imports, directly or through others (function-level imports too)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(imported for imported in GRAPH.get(name, ()) if imported in GRAPH)
    return seen


@pytest.mark.parametrize("entry", JOB_ENTRY_POINTS)
def test_a_scheduled_job_never_imports_the_workbook(entry: str) -> None:
    assert entry in GRAPH, f"{entry} is not a module of the package"
    reached = sorted(name for name in reachable(entry) if name.split(".")[1] in WORKBOOK_ONLY + DEPLOY_ONLY)
    assert not reached, f"{entry} reaches workbook-only or deployment modules: {reached}"


def test_the_job_check_sees_a_workbook_import() -> None:
    assert any(name.startswith("icestream.producer") for name in reachable("icestream.cli.produce"))


def test_the_demos_check_sees_an_import_of_the_demos() -> None:
    # No module outside demos/ imports it since the demos' table names moved to config (issue 58):
    # one demo importing another is the import the check must see.
    assert "icestream.demos.routed_demo" in reachable("icestream.demos.crash")
