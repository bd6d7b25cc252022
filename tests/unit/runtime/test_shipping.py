"""Shipping to executors: what is pinned, what the zip holds, each mode's settings, and one-line errors."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from icestream.config import load_settings
from icestream.errors import ExecutorImportError, ShipError
from icestream.runtime import shipping

WORKER_TRACEBACK = """An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/spark/python/lib/pyspark.zip/pyspark/serializers.py", line 472, in loads
    return cloudpickle.loads(obj, encoding=encoding)
ModuleNotFoundError: No module named 'icestream'
"""


def cluster_settings(tmp_path: Path, **overrides: str):
    return load_settings(spark_master="spark://head:7077", ship_cache_dir=str(tmp_path / "ship"), **overrides)


def test_requirements_are_the_whole_closure_at_this_pythons_versions() -> None:
    import importlib.metadata

    pins = dict(pin.split("==") for pin in shipping.pinned_requirements())
    for name in ("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "PyYAML", "pyarrow"):
        assert pins[name] == importlib.metadata.version(name)
    assert "pyspark" not in pins  # Spark ships its own pyspark.zip
    assert "pytest" not in pins  # extras (pandas[test]) stay out
    assert "icestream" not in pins


def test_a_missing_root_distribution_says_so() -> None:
    with pytest.raises(ShipError, match="not-a-distribution is not installed"):
        shipping.pinned_requirements(("not-a-distribution",))


def test_package_zip_holds_the_package_and_is_built_once(tmp_path: Path) -> None:
    settings = cluster_settings(tmp_path)
    first = shipping.package_zip(settings)
    with zipfile.ZipFile(first) as archive:
        names = set(archive.namelist())
    assert {
        "icestream/__init__.py",
        "icestream/ingest/reading/shard_reader.py",
        "icestream/runtime/shipping.py",
    } <= names
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    mtime = first.stat().st_mtime_ns
    assert shipping.package_zip(settings) == first
    assert first.stat().st_mtime_ns == mtime


def test_local_masters_and_none_ship_nothing(tmp_path: Path) -> None:
    assert shipping.ship_plan(load_settings(ship_cache_dir=str(tmp_path))) == shipping.ShipPlan("none")
    assert shipping.ship_plan(cluster_settings(tmp_path, ship="none")) == shipping.ShipPlan("none")


def test_package_mode_ships_the_zip_on_py_files(tmp_path: Path) -> None:
    plan = shipping.ship_plan(cluster_settings(tmp_path, ship="package"))
    assert plan.conf == {"spark.submit.pyFiles": str(plan.artifacts[0])}
    assert plan.environ == {}
    assert shipping.submit_arguments(plan) == ["--py-files", str(plan.artifacts[0])]


def test_packed_mode_ships_the_environment_and_points_executors_at_its_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "executor-env.tar.gz"
    monkeypatch.setattr(shipping, "packed_environment", lambda settings: archive)  # building needs PyPI
    plan = shipping.ship_plan(cluster_settings(tmp_path))
    assert plan.conf["spark.archives"] == f"{archive}#icestream_env"
    assert plan.conf["spark.pyspark.python"] == "./icestream_env/bin/python"
    assert plan.environ == {"PYSPARK_PYTHON": "./icestream_env/bin/python"}
    arguments = shipping.submit_arguments(plan)
    assert arguments[:2] == ["--archives", f"{archive}#icestream_env"]
    assert "spark.pyspark.python=./icestream_env/bin/python" in arguments
    assert any(argument.startswith("spark.pyspark.driver.python=") for argument in arguments)


@pytest.mark.parametrize(
    ("ship", "advice"),
    [("none", "set ICESTREAM_SHIP=packed"), ("package", "icestream ship --requirements"), ("packed", "same path")],
)
def test_a_worker_import_failure_becomes_one_line_naming_the_setting(tmp_path: Path, ship: str, advice: str) -> None:
    error = shipping.executor_import_error(RuntimeError(WORKER_TRACEBACK), cluster_settings(tmp_path, ship=ship))
    assert isinstance(error, ExecutorImportError)
    message = str(error)
    assert len(message.splitlines()) == 1
    assert "cannot import 'icestream'" in message
    assert f"ICESTREAM_SHIP={ship}" in message
    assert advice in message


def test_a_missing_executor_python_and_other_failures(tmp_path: Path) -> None:
    settings = cluster_settings(tmp_path)
    missing = RuntimeError('java.io.IOException: Cannot run program "./icestream_env/bin/python": error=2')
    assert "cannot start Python './icestream_env/bin/python'" in str(shipping.executor_import_error(missing, settings))
    assert shipping.executor_import_error(RuntimeError("ShardReadError: throttled"), settings) is None
    shipping.raise_if_executor_import_failed(RuntimeError("anything else"), settings)  # does not raise
    with pytest.raises(ExecutorImportError, match="master yarn"):
        shipping.raise_if_executor_import_failed(RuntimeError(WORKER_TRACEBACK), settings, master="yarn")


def test_environments_are_filled_by_the_uv_beside_this_python_without_pip_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    uv = bin_dir / "uv"
    uv.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    uv.chmod(0o755)
    monkeypatch.setattr(shipping.sys, "executable", str(bin_dir / "python"))

    python = shipping.make_venv(tmp_path / "env", ["six==1.17.0"])

    assert python == tmp_path / "env" / "bin" / "python"
    assert calls.read_text().split() == [
        "pip",
        "install",
        "--python",
        str(python),
        "--quiet",
        "--no-deps",
        "six==1.17.0",
    ]
    assert not list((tmp_path / "env").glob("lib/python*/site-packages/pip")), "uv installs from outside"


def test_without_uv_the_new_environment_installs_with_its_own_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shipping.sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    python = tmp_path / "env" / "bin" / "python"
    assert shipping.installer(python)[:4] == [str(python), "-m", "pip", "install"]
    assert "--no-deps" in shipping.installer(python)
