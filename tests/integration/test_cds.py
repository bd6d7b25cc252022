"""A driver JVM started by ``get_spark`` maps the class data sharing archive that ``make setup`` builds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from icestream.config import Settings
from icestream.runtime import cds

SESSION = "from icestream.runtime.spark import get_spark; print(get_spark().range(3).count())"


def test_a_new_driver_loads_sparks_classes_from_the_archive(settings: Settings, tmp_path: Path) -> None:
    extra, jars = cds.session_jars(settings)
    assert "iceberg-spark-runtime" in jars, "the Iceberg jar is part of the archive's key"
    path, _seconds = cds.build(settings.path("jar_cache_dir"), extra, jars=jars)  # `make setup` built it, or now
    assert path is not None
    assert path == cds.archive_path(settings.path("jar_cache_dir"), extra, jars)
    log = tmp_path / "class-load.log"
    env = {
        **os.environ,
        "SPARK_SUBMIT_OPTS": f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -Xlog:class+load=info:file={log}",
    }
    result = subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "3"
    assert "[cds" not in result.stdout + result.stderr, "the JVM says nothing about the archive"
    loaded = {
        line.split()[1]: line
        for line in log.read_text().splitlines()
        if "[class,load]" in line and len(line.split()) > 1
    }
    # Spark's own classes, and the Iceberg one every session loads from spark.jars (spark._verify_classes).
    for name in (
        "org.apache.spark.SparkContext",
        "org.apache.spark.sql.SparkSession",
        "org.apache.iceberg.spark.SparkCatalog",
    ):
        assert "source: shared objects file (top)" in loaded[name], loaded[name]


def test_a_driver_with_a_flight_recording_starts_without_the_archive(tmp_path: Path) -> None:
    """Java Flight Recorder and the archive together crashed the JVM (SIGSEGV) here: never both."""
    options = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -XX:StartFlightRecording=filename={tmp_path / 'r.jfr'}"
    env = {**os.environ, "SPARK_SUBMIT_OPTS": options}
    result = subprocess.run(
        [sys.executable, "-c", SESSION], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "3"
    assert not list(tmp_path.glob("hs_err_pid*.log")), "the JVM crashed"
