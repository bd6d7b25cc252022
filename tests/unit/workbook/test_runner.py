"""The notebook runner's parameters: a name no notebook of the run declares is refused before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from icestream import cli
from icestream.errors import ParameterError
from icestream.workbook import runner


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[dict[Path, dict[str, Any]]]:
    """What the runner would have executed, each notebook with its parameters; nothing is executed."""
    calls: list[dict[Path, dict[str, Any]]] = []
    monkeypatch.setattr(runner, "_run", lambda notebooks, *_args: calls.append(notebooks) or [])
    return calls


def notebook(folder: Path, name: str, parameters: str | None) -> Path:
    cells = [new_markdown_cell(f"# {name}"), new_code_cell(parameters or "x = 1"), new_code_cell("print(1)")]
    if parameters is not None:
        cells[1].metadata["tags"] = ["parameters"]
    path = folder / name
    nbformat.write(new_notebook(cells=cells), path)
    return path


def test_a_mistyped_parameter_is_refused_naming_the_nearest(tmp_path: Path, ran: list) -> None:
    path = notebook(tmp_path, "00_a.ipynb", "shard_count: int = 4  # shards\nstream_name: str = 's'  # the stream")
    with pytest.raises(
        ParameterError, match=r"shard_cuont is not a parameter of 00_a\.ipynb; did you mean shard_count\?"
    ):
        runner.run_notebooks([path], tmp_path / "out", {"shard_cuont": 2}, report=lambda _: None)
    assert ran == [], "refused before anything ran"


def test_a_parameter_goes_to_the_notebooks_that_declare_it(tmp_path: Path, ran: list) -> None:
    first = notebook(tmp_path, "00_a.ipynb", "stream_name: str = 's'  # the stream")
    second = notebook(tmp_path, "01_b.ipynb", "table: str = 't'  # the table\nsize = 0")
    runner.run_notebooks(
        [first, second], tmp_path / "out", {"stream_name": "x"}, report=lambda _: None, overrides={"01": {"size": 3}}
    )
    assert ran == [{first: {"stream_name": "x"}, second: {"size": 3}}], "papermill is never handed an unknown name"


def test_a_parameter_no_notebook_of_the_run_declares_is_refused(tmp_path: Path, ran: list) -> None:
    first = notebook(tmp_path, "00_a.ipynb", "stream_name: str = 's'  # the stream")
    second = notebook(tmp_path, "01_b.ipynb", None)  # no parameters cell: papermill would inject at the top
    with pytest.raises(ParameterError, match=r"tabel is not a parameter of any notebook of this run"):
        runner.run_notebooks([first, second], tmp_path / "out", {"tabel": "x"}, report=lambda _: None)
    with pytest.raises(ParameterError, match=r"size is not a parameter of 01_b\.ipynb \(it has no parameters cell\)"):
        runner.run_notebooks([first, second], tmp_path / "out", overrides={"01": {"size": 1}}, report=lambda _: None)
    assert ran == []


def test_icestream_run_refuses_a_typo_in_one_line(ran: list, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "00", "-p", "shard_cuont", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "error: shard_cuont is not a parameter of 00_setup.ipynb; did you mean shard_count? "
        "Its parameters are profile, stream_name, shard_count."
    ]
    assert captured.out == "", "refused before the parameters line, before any notebook"
    assert ran == []


def test_the_workbooks_notebooks_declare_their_parameters_cell() -> None:
    every = runner.notebook_paths()
    declared = {path.name[:2]: runner.notebook_parameters(path) for path in every}
    assert declared["00"] == ("profile", "stream_name", "shard_count")
    assert all(declared.values()), "every notebook has parameters"
