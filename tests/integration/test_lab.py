"""``make lab`` starts JupyterLab (as root here, as in most containers) on the workbook's notebooks and kernel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from icestream.config import project_home
from icestream.workbook.runner import KERNEL_NAME
from tests.helpers.lab import Lab, running_lab


@pytest.fixture
def jupyterlab(tmp_path: Path):
    """JupyterLab started as ``make lab`` starts it, on the project folder."""
    with running_lab(project_home(), tmp_path) as lab:
        yield lab


def test_lab_serves_the_notebooks_on_the_projects_kernel_without_prompts(jupyterlab: Lab) -> None:
    if os.geteuid() == 0:
        assert "Running as root is not recommended" not in jupyterlab.log.read_text()
    kernels = jupyterlab.get("/api/kernelspecs")
    assert kernels is not None
    assert KERNEL_NAME in kernels["kernelspecs"], sorted(kernels["kernelspecs"])
    assert kernels["kernelspecs"][KERNEL_NAME]["spec"]["display_name"] == "Python (icestream)"
    folder = jupyterlab.get("/api/contents/notebooks")
    assert folder is not None
    names = sorted(item["name"] for item in folder["content"])
    assert "00_setup.ipynb" in names, names
    notebook = jupyterlab.get("/api/contents/notebooks/03_realtime_queries.ipynb")
    assert notebook is not None
    assert notebook["content"]["metadata"]["kernelspec"]["name"] == KERNEL_NAME
    notification = jupyterlab.get("/lab/api/settings/@jupyterlab/apputils-extension:notification")
    assert notification is not None
    defaults = {name: value.get("default") for name, value in notification["schema"]["properties"].items()}
    assert defaults["fetchNews"] == "false", "never ask about news (the default, 'none', asks)"
    assert defaults["checkForUpdates"] is False
