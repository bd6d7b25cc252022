"""The benchmarks name the library's modules, functions and patch points: they must still exist.

The benchmarks are not run by ``make test`` (they measure; they take minutes), so a moved function
broke them silently: ``bench_pipeline.py`` replaced ``icestream.ingest.reading.planner.read_arrow`` for its
in-memory read tasks after the function had moved to ``icestream.ingest.reading.spark_job``, and stopped
with an AttributeError only when run. Had the replacement been an assignment alone, it would have
measured the emulator instead of the in-memory records, with no error at all.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.spark_line import HAS_PYTHON_SOURCES

BENCH = Path(__file__).resolve().parents[2] / "bench"


def references(tree: ast.AST) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(module, name)`` for each ``from icestream... import name``, and for each assignment
    ``alias.attr = ...`` to a module imported that way (a patch point)."""
    imported: list[tuple[str, str]] = []
    modules: dict[str, str] = {}  # local alias -> the icestream module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "icestream":
            for alias in node.names:
                imported.append((node.module or "", alias.name))
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    patched = [
        (modules[target.value.id], target.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in modules
    ]
    return imported, patched


@pytest.mark.parametrize("script", sorted(BENCH.glob("*.py")), ids=lambda path: path.name)
def test_what_a_benchmark_imports_or_replaces_exists(script: Path) -> None:
    if script.name == "bench_kinesis_source.py" and not HAS_PYTHON_SOURCES:
        pytest.skip("the kinesis source needs Spark 4's Python data source API")
    imported, patched = references(ast.parse(script.read_text(), filename=str(script)))
    missing = []
    for module, name in imported:
        owner = importlib.import_module(module)
        if not hasattr(owner, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"from {module} import {name}")
    for module, name in patched:
        if not hasattr(importlib.import_module(module), name):
            missing.append(f"{module}.{name} (replaced by the benchmark)")
    assert not missing, f"{script.name} names what the library no longer has: {missing}"


def test_a_replaced_function_that_moved_is_found() -> None:
    tree = ast.parse("from icestream.ingest.reading import planner\nplanner.read_arrow = None\n")
    assert references(tree)[1] == [("icestream.ingest.reading.planner", "read_arrow")]
    assert not hasattr(importlib.import_module("icestream.ingest.reading.planner"), "read_arrow")


def bench_module(name: str) -> ModuleType:
    """A module of bench/, imported as its scripts import each other; ``common`` and it are not left in
    ``sys.modules`` (names too general for other tests' imports)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))
        for loaded in (name, "common"):
            sys.modules.pop(loaded, None)


@pytest.mark.parametrize(
    "options", [{}, {"max_batches": 2}, {"duration_seconds": 5.0}, {"max_batches": 3, "dedupe": False}]
)
def test_the_benchmarks_ingest_options_pass_the_ingests_checks(options: dict) -> None:
    # A bounded query's trigger of 0 s was refused from 2026-11-26 (a trigger is 200 ms to 60 s but for
    # a drain): bench_growth.py and bench_schema_evolution.py stopped at their first ingest, unnoticed.
    from icestream.config import load_settings
    from icestream.ingest.options import ingest_options

    ingest_call_options = bench_module("common").ingest_call_options
    ingest_options(load_settings(), **ingest_call_options(options)).validated()


def test_the_smoke_run_covers_every_benchmark() -> None:
    # A benchmark added without a line in bench/smoke.py would never be run before someone measures with it.
    smoke = bench_module("smoke")
    scripts = {path.stem for path in BENCH.glob("bench_*.py")}
    run = [script for script, _ in smoke.RUNS]
    assert len(run) == len(set(run))
    assert set(run) | set(smoke.SKIPPED) == scripts
    assert not set(run) & set(smoke.SKIPPED)
