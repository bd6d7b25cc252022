"""The CLI: argument handling and one-line errors (no emulator, no JVM)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from icestream import cli
from icestream.runner import notebook_paths

pytestmark = pytest.mark.unit


def test_bad_setting_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ICESTREAM_TABLE", "x; DROP TABLE y")
    assert cli.main(["setup"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ICESTREAM_TABLE / table:")
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_doctor_reports_a_bad_profile(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ICESTREAM_PROFILE", "staging")
    assert cli.main(["doctor", "--quick"]) == 1
    assert capsys.readouterr().out.startswith("FAIL settings")


def test_emulator_down_is_reported_with_the_command_that_starts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path))
    assert cli.main(["emulator", "status"]) == 1
    assert "icestream emulator start" in capsys.readouterr().out


def test_run_parameters_are_yaml_scalars() -> None:
    args = cli.build_parser().parse_args(["run", "00", "-p", "shard_count", "2", "-p", "stream_name", "s1"])
    assert cli._parameters(args.parameter) == {"shard_count": 2, "stream_name": "s1"}


def test_unknown_notebook_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "99_nothing"]) == 2
    assert "No notebook matches '99_nothing'" in capsys.readouterr().err


def test_notebooks_run_in_name_order() -> None:
    every = notebook_paths()
    assert every, "notebooks/ has notebooks"
    assert [path.name for path in every] == sorted(path.name for path in every)
    assert every[0].name == "00_setup.ipynb"
    assert notebook_paths(["00"]) == [every[0]]
    assert os.sep not in every[0].name


def test_ship_requirements_lists_the_executors_pins(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ship", "--requirements"]) == 0
    pins = capsys.readouterr().out.split()
    assert any(pin.startswith("boto3==") for pin in pins)
    assert all("==" in pin for pin in pins)
