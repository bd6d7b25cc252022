"""``make lab`` starts JupyterLab (as root here, as in most containers) on the workbook's notebooks and kernel."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from icestream.config import project_home
from icestream.operations.lab import lab_command, write_overrides
from icestream.operations.runner import KERNEL_NAME
from icestream.stream.emulator import free_port
from tests.helpers.waiting import wait_until

TOKEN = "icestream-test-token"


def _get(base: str, path: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{base}{path}?token={TOKEN}", timeout=5) as answer:  # noqa: S310 - http on loopback
            return json.loads(answer.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


@pytest.fixture
def jupyterlab(tmp_path: Path):
    """JupyterLab started as ``make lab`` starts it, on a free loopback port; stopped afterwards."""
    write_overrides()
    port = free_port()
    log = tmp_path / "lab.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            lab_command(project_home(), port=port, token=TOKEN),
            stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")},
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:

        def answering() -> dict | None:
            assert process.poll() is None, log.read_text()[-3000:]
            return _get(base, "/api/status")

        wait_until(answering, 120, interval=0.25, message="JupyterLab to answer")
        yield base, log
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_lab_serves_the_notebooks_on_the_projects_kernel_without_prompts(jupyterlab) -> None:
    base, log = jupyterlab
    if os.geteuid() == 0:
        assert "Running as root is not recommended" not in log.read_text()
    kernels = _get(base, "/api/kernelspecs")
    assert kernels is not None
    assert KERNEL_NAME in kernels["kernelspecs"], sorted(kernels["kernelspecs"])
    assert kernels["kernelspecs"][KERNEL_NAME]["spec"]["display_name"] == "Python (icestream)"
    folder = _get(base, "/api/contents/notebooks")
    assert folder is not None
    names = sorted(item["name"] for item in folder["content"])
    assert "00_setup.ipynb" in names, names
    notebook = _get(base, "/api/contents/notebooks/03_realtime_queries.ipynb")
    assert notebook is not None
    assert notebook["content"]["metadata"]["kernelspec"]["name"] == KERNEL_NAME
    notification = _get(base, "/lab/api/settings/@jupyterlab/apputils-extension:notification")
    assert notification is not None
    defaults = {name: value.get("default") for name, value in notification["schema"]["properties"].items()}
    assert defaults["fetchNews"] == "false", "never ask about news (the default, 'none', asks)"
    assert defaults["checkForUpdates"] is False
