"""The job core alone: a venv from ``pip install icestream`` (no extras) runs the job entry points.

The venv gets the package without extras (pyproject's ``dependencies``) plus, standing in for what
EMR or Glue provide, ``pyspark`` and the Iceberg runtime jars at the versions in constraints.txt.
No moto, DuckDB, pyiceberg, matplotlib, papermill or jupyter: the job must not need them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from icestream.config import Settings, project_home
from tests.helpers.ingest import refresh_tables, table_state
from tests.helpers.streams import event_payload, put

# What the platform provides, not icestream's own dependencies (docs/platforms.md).
PLATFORM_PACKAGES = ("pyspark",)
WORKBOOK_ONLY = ("moto", "duckdb", "pyiceberg", "matplotlib", "papermill", "ipykernel", "tqdm")


@pytest.fixture(scope="module")
def slim_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A venv with the slim install and the platform's Spark; yields its python, removes it after the module."""
    uv = Path(sys.executable).parent / "uv"
    venv = tmp_path_factory.mktemp("slim") / "venv"
    constraints = str(project_home() / "constraints.txt")
    subprocess.run([str(uv), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    command = [str(uv), "pip", "install", "-q", "--python", str(python), "-c", constraints]

    def install(*requirements: str) -> None:
        # From uv's cache first: make filled it with these pins, and pyspark is a source distribution, which uv
        # otherwise downloads and builds again (about 37 CPU-seconds) whenever the index answers its revalidation
        # as modified, as the one here does.
        if subprocess.run([*command, "--offline", *requirements], capture_output=True, check=False).returncode:
            subprocess.run([*command, *requirements], check=True)

    # Built from a copy, so the build leaves nothing (build/, egg-info) in the checkout.
    source = venv.parent / "source"
    shutil.copytree(project_home() / "lib", source / "lib", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(project_home() / name, source / name)
    install(str(source))
    probe = "import importlib.util, sys; print(*[n for n in sys.argv[1:] if importlib.util.find_spec(n)])"
    imported = subprocess.run(
        [str(python), "-c", probe, *WORKBOOK_ONLY],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert imported.stdout.split() == [], "the slim install pulled in workbook packages"
    install(*PLATFORM_PACKAGES)
    yield python
    shutil.rmtree(venv.parent, ignore_errors=True)  # about 700 MB the rest of the session does not need


def test_the_job_entry_points_import_from_the_slim_install(slim_python: Path) -> None:
    modules = "icestream.jobs.ingest", "icestream.jobs.cli", "icestream.cli", "icestream.cli.maintain"
    result = subprocess.run(
        [str(slim_python), "-c", f"import {', '.join(modules)}; import sys; print(sorted(sys.modules))"],
        capture_output=True, text=True, cwd="/",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    loaded = {name.strip("'[],") for name in result.stdout.split()}
    assert loaded.isdisjoint(WORKBOOK_ONLY)


def test_the_slim_install_ingests_from_the_emulator(fresh, spark, slim_python: Path, tmp_path: Path) -> None:
    made: Settings = fresh(shards=1, prefix="slim")
    put(made, [(event_payload(number, f"u{number % 3}"), f"u{number % 3}") for number in range(40)])
    # The platform's jars: those make setup resolved from Maven Central (the slim install has no checkout of its own).
    jar_cache = str(made.path("jar_cache_dir"))
    env = {**os.environ, "ICESTREAM_STREAM_NAME": made.stream_name, "ICESTREAM_TABLE": made.table}
    env["ICESTREAM_JAR_CACHE_DIR"] = jar_cache
    result = subprocess.run(
        [str(slim_python), "-m", "icestream.jobs.ingest", "--available-now"],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    refresh_tables(spark, made)
    events, _rejects = table_state(spark, made)
    assert events == {f"ev-{number}": 1 for number in range(40)}
