"""The code of a committed notebook, parsed: what its cells call, for tests of what a lesson types in a cell."""

from __future__ import annotations

import ast
import json

from icestream.workbook.runner import notebook_paths


def code_cells(notebook: str) -> list[ast.Module]:
    """The parsed code cells of the workbook's notebook named ``notebook`` (e.g. ``"07_....ipynb"``)."""
    path = next(path for path in notebook_paths() if path.name == notebook)
    cells = json.loads(path.read_text())["cells"]
    return [ast.parse("".join(cell["source"])) for cell in cells if cell["cell_type"] == "code"]


def spark_sql_texts(notebook: str) -> list[str]:
    """The first argument of every ``spark.sql(...)`` call in the notebook's cells, as source text."""
    return [
        ast.unparse(node.args[0])
        for tree in code_cells(notebook)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "spark.sql" and node.args
    ]
