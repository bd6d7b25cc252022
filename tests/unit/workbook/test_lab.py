"""``make lab`` / ``icestream lab``: the command line and the settings overrides it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icestream.workbook import lab


@pytest.mark.parametrize(("uid", "allowed"), [(0, True), (1000, False)])
def test_root_is_allowed_only_when_it_is_root(monkeypatch: pytest.MonkeyPatch, uid: int, allowed: bool) -> None:
    monkeypatch.setattr(lab.os, "geteuid", lambda: uid)
    command = lab.lab_command(Path("/project"), port=8899, token="abc")
    assert ("--allow-root" in command) is allowed
    assert command[command.index("--ip") + 1] == "127.0.0.1"
    assert "--ServerApp.root_dir=/project" in command
    assert "--LabApp.default_url=/lab/tree/notebooks" in command
    assert {"--port=8899", "--IdentityProvider.token=abc", "--no-browser"} <= set(command)


def test_overrides_turn_off_the_news_prompt_and_keep_other_settings(tmp_path: Path) -> None:
    path = lab.overrides_path(str(tmp_path))
    path.parent.mkdir(parents=True)
    theirs = {
        "@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
        "@jupyterlab/apputils-extension:notification": {"doNotDisturbMode": True},
    }
    path.write_text(json.dumps(theirs))
    assert lab.write_overrides(str(tmp_path)) == path
    written = json.loads(path.read_text())
    assert written["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}
    assert written["@jupyterlab/apputils-extension:notification"] == {
        "doNotDisturbMode": True,
        "fetchNews": "false",
        "checkForUpdates": False,
    }
    lab.write_overrides(str(tmp_path))
    assert json.loads(path.read_text()) == written, "writing twice changes nothing"


def test_an_unreadable_overrides_file_is_replaced(tmp_path: Path) -> None:
    path = lab.overrides_path(str(tmp_path))
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    lab.write_overrides(str(tmp_path))
    assert json.loads(path.read_text()) == lab.OVERRIDES
