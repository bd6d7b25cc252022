"""The resolved Iceberg runtime jar is complete, and the stack's pins agree with what is installed.

A Python wheel once shipped Iceberg 1.10.2's runtime stripped of its shaded Jackson and HttpClient 5
classes (docs/stack.md); the jar from Maven Central is checked for every shaded class the catalog,
the sink and the REST client name, so a stripped or wrong jar fails here, not at the first CREATE TABLE.
"""

from __future__ import annotations

import importlib.metadata
import re
import zipfile
from pathlib import Path

import pytest

from icestream.config import load_settings, project_home
from icestream.runtime import jars
from icestream.stack import lines, spark_line

# Iceberg's own classes that the catalog (Spark's catalog, the JDBC catalog, table metadata), the
# Structured Streaming sink and the REST catalog client are made of: each shaded class they name must be
# in the jar, or the JVM fails with NoClassDefFoundError the first time the class is used.
USERS = (
    "org/apache/iceberg/spark/SparkCatalog.class",
    "org/apache/iceberg/spark/SparkSessionCatalog.class",
    "org/apache/iceberg/jdbc/",
    "org/apache/iceberg/TableMetadataParser",
    "org/apache/iceberg/spark/source/SparkWrite",
    "org/apache/iceberg/rest/",
)
SHADED_REFERENCE = re.compile(rb"org/apache/iceberg/shaded/[A-Za-z0-9_/$]+")


@pytest.fixture(scope="module")
def runtime_jar() -> Path:
    """The runtime jar `make setup` resolved (the session's first jar)."""
    resolved = jars.resolved_jars(load_settings(catalog_type="hadoop"), resolve=False)
    (jar,) = [path for path in resolved if path.name == jars.runtime_jar_name(spark_line().iceberg)]
    return jar


def test_the_installed_pyspark_is_the_pinned_one_of_its_line() -> None:
    line = spark_line()
    assert importlib.metadata.version("pyspark") == line.pyspark, "the venv is stale: run `make setup`"
    asked = load_settings().spark_line
    assert asked in (None, line.name), f"ICESTREAM_SPARK_LINE={asked}, but the venv holds Spark {line.name}"


def test_every_line_pins_a_runtime_of_its_own_spark_and_scala() -> None:
    for name, line in lines().items():
        assert line.runtime.coordinate == f"org.apache.iceberg:iceberg-spark-runtime-{name}_{line.scala}:{line.iceberg}"
        assert all(
            package.artifact.endswith(f"_{line.scala}") for package in line.packages if "_2." in package.artifact
        )
        assert line.pyspark.startswith(f"{name}.")


def test_no_jar_comes_from_a_python_package() -> None:
    resolved = jars.resolved_jars(load_settings(catalog_type="hadoop"), resolve=False)
    assert resolved, "nothing resolved"
    assert all("site-packages" not in str(path) for path in resolved)
    assert "snowpark" not in (project_home() / "constraints.txt").read_text()


def test_the_runtime_jar_holds_the_classes_each_part_needs(runtime_jar: Path) -> None:
    assert jars.missing_classes(runtime_jar) == []
    jars.check_jars((runtime_jar,))


def test_every_shaded_class_the_catalog_sink_and_rest_client_name_is_there(runtime_jar: Path) -> None:
    with zipfile.ZipFile(runtime_jar) as archive:
        entries = set(archive.namelist())
        users = sorted(e for e in entries if e.endswith(".class") and e.startswith(USERS))
        named = {match.decode() for user in users for match in SHADED_REFERENCE.findall(archive.read(user))}
    assert len(users) > 200, "the jar lacks the catalog, the sink or the REST client themselves"
    packages = {"/".join(name.split("/")[4:8]) for name in named}
    assert {"com/fasterxml/jackson/core", "org/apache/hc/client5"} <= packages, "the scan found no shaded names"
    assert sorted(name for name in named if f"{name}.class" not in entries) == []
