"""The pinned wheel's Iceberg runtime jar is complete: what the catalog, the sink and the REST client load.

Release 1.0.3 of ``snowpark-connect-deps-iceberg`` shipped the same Iceberg 1.10.2 runtime stripped of
its shaded Jackson and HttpClient 5 classes; these tests fail with it installed (docs/stack.md).
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
import zipfile
from pathlib import Path

import pytest

from icestream.config import load_settings, project_home
from icestream.runtime import jars

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
def wheel_jar() -> Path:
    jar = jars.wheel_jar_folder() / jars.runtime_jar_name(load_settings().iceberg_version)
    assert jar.is_file(), f"{jar} is not in the installed wheel"
    return jar


def test_the_pin_is_one_release_everywhere() -> None:
    name, version = jars.WHEEL_DISTRIBUTION.split("==")
    pyproject = tomllib.loads((project_home() / "pyproject.toml").read_text())
    assert jars.WHEEL_DISTRIBUTION in pyproject["project"]["optional-dependencies"]["workbook"]
    assert jars.WHEEL_DISTRIBUTION in (project_home() / "constraints.txt").read_text().splitlines()
    assert importlib.metadata.version(name) == version, "the venv is stale: run `make setup`"


def test_the_wheel_jar_holds_the_classes_each_part_needs(wheel_jar: Path) -> None:
    assert jars.missing_classes(wheel_jar) == []
    jars.check_jars((wheel_jar,))


def test_every_shaded_class_the_catalog_sink_and_rest_client_name_is_there(wheel_jar: Path) -> None:
    with zipfile.ZipFile(wheel_jar) as archive:
        entries = set(archive.namelist())
        users = sorted(e for e in entries if e.endswith(".class") and e.startswith(USERS))
        named = {match.decode() for user in users for match in SHADED_REFERENCE.findall(archive.read(user))}
    assert len(users) > 200, "the jar lacks the catalog, the sink or the REST client themselves"
    packages = {"/".join(name.split("/")[4:8]) for name in named}
    assert {"com/fasterxml/jackson/core", "org/apache/hc/client5"} <= packages, "the scan found no shaded names"
    assert sorted(name for name in named if f"{name}.class" not in entries) == []
