"""Execute notebooks headless: 00_setup through the project's runner (papermill), then nbval."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from icestream.config import Settings, project_home
from icestream.runner import kernel_name, notebook_paths, run_notebooks

pytestmark = pytest.mark.notebook


@pytest.mark.integration
def test_setup_notebook_creates_stream_and_tables(spark, settings: Settings, emulator: str, test_home: Path) -> None:
    from icestream.clients import kinesis_client

    output = test_home / "output-setup"
    runs = run_notebooks(notebook_paths(["00"]), output, {"shard_count": 2}, report=lambda _: None, progress=False)
    assert [run.notebook for run in runs] == ["00_setup.ipynb"]
    assert (output / "00_setup.ipynb").is_file()
    summary = kinesis_client(settings).describe_stream_summary(StreamName=settings.stream_name)
    assert summary["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE"
    assert spark.catalog.tableExists(settings.table_name)
    assert spark.catalog.tableExists(settings.rejects_table_name)
    # Running it again is harmless.
    run_notebooks(notebook_paths(["00"]), output, {"shard_count": 2}, report=lambda _: None, progress=False)


@pytest.mark.integration
@pytest.mark.slow
def test_nbval_lax_over_every_notebook(emulator: str, test_home: Path) -> None:
    """``pytest --nbval-lax notebooks/`` in the test environment (same emulator, same warehouse)."""
    notebooks = [str(path) for path in notebook_paths()]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "--nbval-kernel-name",
            kernel_name(),
            "-p",
            "no:cacheprovider",
            "-o",
            "filterwarnings=",
            "-q",
            *notebooks,
        ],
        cwd=project_home(),
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout), result.stdout[-2000:]
    assert " failed" not in result.stdout
    assert " error" not in result.stdout
