"""Naming the ingest transform as ``module:function``: every way it can go wrong is one clear error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from icestream.cli import main
from icestream.errors import ConfigError
from icestream.ingest.transform import load_transform

NOT_A_FUNCTION = 3


def sample_transform(frame):
    return frame


def test_a_named_function_is_loaded() -> None:
    assert load_transform(f"{__name__}:sample_transform") is sample_transform


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "module:function"),
        (":fn", "module:function"),
        ("mod:", "module:function"),
        ("bad-name:fn", "module:function"),
        ("icestream_no_such_module:fn", "cannot import icestream_no_such_module.*ModuleNotFoundError.*PYTHONPATH"),
        (f"{__name__}:no_such_function", "has no function no_such_function"),
        (f"{__name__}:NOT_A_FUNCTION", "has no function NOT_A_FUNCTION"),
    ],
)
def test_a_spec_that_cannot_be_loaded_says_why(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_transform(spec)


def test_a_module_that_fails_while_importing_is_reported(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "broken_transform_module.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="RuntimeError: boom at import"):
        load_transform("broken_transform_module:fn")
    sys.modules.pop("broken_transform_module", None)


@pytest.mark.parametrize("command", ["ingest", "load"])
def test_the_cli_fails_in_one_line_before_spark_starts(command: str, capsys) -> None:
    arguments = ["x.jsonl"] if command == "load" else []
    assert main([command, *arguments, "--transform", "icestream_no_such_module:fn"]) == 2
    assert "cannot import icestream_no_such_module" in capsys.readouterr().err
