"""The cluster tests: a Spark standalone master and two workers on loopback whose Python lacks icestream.

The workers are separate JVMs (one core each) started from pip's pyspark
(:class:`icestream.runtime.standalone.StandaloneCluster`) and stopped at the end even when a test fails.
The nodes' Python is a bare virtual environment with pyspark's own Python dependencies only
(py4j, numpy, pyarrow, pandas): no icestream, no boto3. Drivers run as subprocesses
(``spark-submit``, ``python -m icestream.jobs.ingest``, ``icestream ...``, the reliability runner),
so this pytest process never holds a second SparkContext; its own local session
(tests/conftest.py) only creates the tables and checks them afterwards.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from icestream.config import Settings, project_home
from icestream.runtime.shipping import PYSPARK_DISTRIBUTIONS, ShipPlan, make_venv, pinned_requirements, ship_plan
from icestream.runtime.standalone import StandaloneCluster
from tests.conftest import TEST_JVM_OPTIONS

DRIVER_TIMEOUT = 600.0  # seconds one driver subprocess may take before the test gives up on it


@pytest.fixture(scope="session")
def nodes_python() -> Path:
    """The workers' Python: a venv with pyspark's Python dependencies only, made once under .cache/."""
    import hashlib

    requirements = pinned_requirements(PYSPARK_DISTRIBUTIONS)
    key = hashlib.sha256("\n".join([sys.version, *requirements]).encode()).hexdigest()[:12]
    folder = project_home() / ".cache" / "cluster" / f"nodes-python-{key}"
    python = folder / "bin" / "python"
    if not python.exists():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)  # a build interrupted earlier
        make_venv(partial, requirements)
        partial.rename(folder)  # venv scripts hold the path they were made at; pip's are not used here
    return python


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and two one-core workers on 127.0.0.1, stopped at the end of the session."""
    folder = tmp_path_factory.mktemp("standalone")
    cluster = StandaloneCluster(folder, workers=2, cores=1, memory="2g")
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        # Each application's folder on a worker holds the packed environment unpacked (over 1 GB in
        # all); the logs beside them stay for a failure's reading.
        for worker in folder.glob("worker-*"):
            if worker.is_dir():
                shutil.rmtree(worker, ignore_errors=True)


@pytest.fixture(scope="session")
def shipped(settings: Settings, spark_cluster: StandaloneCluster) -> ShipPlan:
    """The packed environment and package zip, built once before any driver needs them."""
    return ship_plan(dataclasses.replace(settings, spark_master=spark_cluster.master_url, ship="packed"))


@pytest.fixture(scope="session")
def conf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``SPARK_CONF_DIR`` whose ``spark-defaults.conf`` gives executors the tests' Java options too
    (drivers get them from ``SPARK_SUBMIT_OPTS``); icestream appends its own options to these."""
    folder = tmp_path_factory.mktemp("spark-conf")
    if TEST_JVM_OPTIONS:
        (folder / "spark-defaults.conf").write_text(f"spark.executor.extraJavaOptions {TEST_JVM_OPTIONS}\n")
    return folder


@pytest.fixture
def driver_env(
    spark_cluster: StandaloneCluster, nodes_python: Path, shipped: ShipPlan, conf_dir: Path
) -> Callable[..., dict[str, str]]:
    """The environment of a driver subprocess on the cluster, for a test's stream and tables."""

    def make(made: Settings, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_CONF_DIR": str(conf_dir),
            "ICESTREAM_SPARK_MASTER": spark_cluster.master_url,
            "ICESTREAM_SHIP": "packed",
            "ICESTREAM_STREAM_NAME": made.stream_name,
            "ICESTREAM_TABLE": made.table,
            # What the nodes run unless the application ships its own Python: no icestream there.
            "PYSPARK_PYTHON": str(nodes_python),
            "SPARK_LOCAL_IP": "127.0.0.1",
            **extra,
        }

    return make


def run_driver(
    command: Sequence[str], env: dict[str, str], log: Path, drivers: int = 1
) -> subprocess.CompletedProcess[str]:
    """Run a command to its end in ``log``'s folder (the test's tmp folder); its output goes to ``log`` too.

    ``drivers`` is how many drivers the command starts one after the other (one per notebook for
    ``icestream run``): each gets :data:`DRIVER_TIMEOUT`.
    """
    result = subprocess.run(
        list(command), env=env, capture_output=True, text=True, timeout=DRIVER_TIMEOUT * drivers,
        stdin=subprocess.DEVNULL, cwd=log.parent,
    )  # fmt: skip
    log.write_text(f"$ {' '.join(command)}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")
    return result
