"""The test helpers' own promises: a wait fails loudly at its deadline, a crash hook fires only where asked."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from tests.helpers.crash import SimulatedCrashError, crash_at
from tests.helpers.waiting import wait_until


def test_wait_until_returns_the_first_truthy_value() -> None:
    calls = itertools.count(1)
    assert wait_until(lambda: next(calls) >= 3 and "ready", timeout=5, interval=0.001) == "ready"


def test_wait_until_fails_loudly_at_its_deadline_naming_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match=r"waited 0\.05 s for the table to fill; the last check gave 0"):
        wait_until(lambda: 0, timeout=0.05, interval=0.01, message="the table to fill")


def test_wait_until_stops_at_once_when_the_condition_asserts() -> None:
    def dead() -> bool:
        raise AssertionError("the query died")

    with pytest.raises(AssertionError, match="the query died"):
        wait_until(dead, timeout=60)


def test_crash_at_fires_only_at_its_phase_and_batch() -> None:
    hook = crash_at("between_commits", batch=2)
    hook("between_commits", 1)
    hook("after_commit", 2)
    with pytest.raises(SimulatedCrashError, match="between_commits"):
        hook("between_commits", 2)
    with pytest.raises(SimulatedCrashError):
        crash_at("after_commit")("after_commit", "/data/a.jsonl")  # any batch, or a load's file


def test_output_defects_names_each_defect_with_its_cell(tmp_path) -> None:
    import nbformat
    import pandas as pd
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from tests.helpers.notebook_text import output_defects

    def shown(frame: pd.DataFrame):
        return new_output("execute_result", data={"text/html": frame.to_html(), "text/plain": repr(frame)})

    bad = pd.DataFrame({"records": [35019.0], "committed_at": [1795566433], "note": [float("nan")],
                        "watermark": [pd.NaT], "parent_id": pd.array([None], dtype="Int64")})  # fmt: skip
    good = pd.DataFrame({"records": [35019], "rows_per_s": [100.0], "records/s": [5967.0],
                         "committed_at": [pd.Timestamp("2026-11-25")]})  # fmt: skip
    cells = [new_code_cell("bad"), new_code_cell("empty"), new_code_cell("sql"), new_code_cell("good")]
    cells[0].outputs = [shown(bad)]
    cells[1].outputs = [new_output("execute_result", data={"text/plain": "Empty DataFrame\nColumns: []"})]
    cells[2].outputs = [
        new_output("stream", name="stdout", text="TIMESTAMP AS OF timestamp_micros(1795566433163000)\n"),
        new_output("stream", name="stdout", text="WHERE m >= timestamp_seconds(:since)\n-- bound: :since = 1796224800"),
        new_output("stream", name="stdout", text="-- bound: :since = 1796224800 (2026-12-02 15:20:00 UTC), :n = 5"),
    ]
    cells[3].outputs = [shown(good)]
    path = tmp_path / "07_x.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    assert output_defects(path) == [
        "07_x.ipynb[0]: count 35019.0 as a float in column 'records'",
        "07_x.ipynb[0]: epoch number 1795566433 in time column 'committed_at'",
        "07_x.ipynb[0]: NaN in column 'note'",
        "07_x.ipynb[0]: NaT in column 'watermark'",
        "07_x.ipynb[0]: <NA> in column 'parent_id'",
        "07_x.ipynb[1]: a bare empty frame",
        "07_x.ipynb[2]: an epoch number in timestamp_micros(1795566433163000)",
        "07_x.ipynb[2]: an epoch number bound: :since = 1796224800",
    ]


def test_output_lines_counts_printed_lines_table_rows_other_text_and_a_chart_as_one(tmp_path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    from tests.helpers.notebook_text import output_lines

    printed, shown, chart = new_code_cell("print"), new_code_cell("frame"), new_code_cell("plot")
    said = new_code_cell("value")
    said.outputs = [new_output("execute_result", data={"text/plain": "{'a': 1,\n 'b': 2}"})]
    printed.outputs = [
        new_output("stream", name="stdout", text="one\ntwo\n"),
        new_output("stream", name="stderr", text="three"),
    ]
    table = (
        '<table border="1">\n<thead><tr style="x"><th>a</th></tr></thead>\n'
        "<tbody><tr><td>1</td></tr>\n<tr>\n<td>2</td></tr></tbody></table>"
    )
    wrapped = "   a  \\\n0  1\n1  2\n\n   b\n0  3\n1  4"  # pandas' text copy, wrapped at 80 characters
    shown.outputs = [new_output("execute_result", data={"text/html": table, "text/plain": wrapped})]
    chart.outputs = [new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>\n<Axes>"})]
    cells = [new_markdown_cell("# not an output\nnor this"), printed, shown, said, chart, new_code_cell("x = 1")]
    path = tmp_path / "00_x.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    assert output_lines(path) == 3 + 3 + 2 + 1  # printed, the table's rows, the value's text, the chart


def imported_test_modules(path: Path) -> list[str]:
    """The ``test_*`` modules a test file imports (absolute or relative): shared code belongs in helpers."""
    imported = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module or ''}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        imported += [name for name in names if name.rsplit(".", 1)[-1].startswith("test_")]
    return imported


def test_no_test_module_imports_another() -> None:
    tests = Path(__file__).resolve().parents[1]
    offenders = {str(path.relative_to(tests)): found for path in sorted(tests.rglob("*.py"))
                 if (found := imported_test_modules(path))}  # fmt: skip
    assert offenders == {}, "move what they share into tests/helpers/"


def test_the_import_check_sees_relative_and_absolute_imports(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    module.write_text("from .test_parse import event\nimport tests.unit.test_cli\nfrom tests.helpers import samples\n")
    assert imported_test_modules(module) == ["test_parse", "tests.unit.test_cli"]
