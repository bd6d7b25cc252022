"""The real provisioning: the stack's packages resolved from Maven Central with Maven, then found offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from icestream.config import load_settings, project_home
from icestream.errors import JarError
from icestream.runtime import jars, maven
from icestream.stack import Package, SparkLine, spark_line


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """A new jar cache whose Maven repository is the project's (what make setup downloaded), so Maven itself runs
    (resolving, checking checksums) without downloading 100 MB again."""
    folder = tmp_path / "cache"
    folder.mkdir()
    shared = project_home() / ".cache" / "jars" / maven.MAVEN_REPOSITORY
    assert shared.is_dir(), "run `make setup` first"
    (folder / maven.MAVEN_REPOSITORY).symlink_to(shared)
    return folder


def test_the_line_resolves_with_maven_and_is_then_found_offline(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(jar_cache_dir=str(cache), catalog_type="hadoop")
    plan = jars.iceberg_plan(settings)
    names = [path.name for path in plan.jars]
    line = spark_line()
    assert names[0] == jars.runtime_jar_name(line.iceberg)
    assert any(name.startswith("spark-sql-kafka-0-10_") for name in names)
    assert any(name.startswith("kafka-clients-") for name in names)
    assert not any(name.startswith(("scala-library-", "hadoop-client-", "iceberg-aws-bundle-")) for name in names)
    assert jars.missing_classes(plan.jars[0]) == []
    repository = cache / maven.MAVEN_REPOSITORY
    for path in plan.jars:  # each copy is the jar whose SHA-1 Maven Central published
        (downloaded,) = repository.rglob(path.name)
        assert maven.published_sha1(downloaded) == maven.verify(downloaded)
        assert path.read_bytes() == downloaded.read_bytes()
    monkeypatch.setenv("PATH", "/nonexistent")  # no Maven, no network: the manifest answers
    assert jars.iceberg_plan(settings).jars == plan.jars
    glue = jars.iceberg_plan(
        load_settings(jar_source="auto", jar_cache_dir=str(cache), catalog_type="glue", warehouse="s3://b/w")
    )
    assert any(path.name.startswith("iceberg-aws-bundle-") for path in glue.jars)


def test_a_coordinate_central_does_not_serve_is_one_clear_line(tmp_path: Path, cache: Path) -> None:
    missing = Package("org.apache.iceberg:iceberg-core:0.0.0-icestream-no-such-release", "a test of the refusal")
    line = SparkLine("0.0", "0.0.0", "2.12", "0.0.0", (missing,))
    with pytest.raises(JarError) as error:
        maven.resolve(line, line.packages, cache, ())
    assert str(error.value).startswith(f"Maven Central did not serve {missing.coordinate}, which icestream needs for")
    assert "\n" not in str(error.value)
    assert not os.path.exists(cache / "spark-0.0" / maven.MANIFEST)
