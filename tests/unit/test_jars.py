"""Jar provisioning: the resolution order and one clear error for each way it can go wrong."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from icestream import jars
from icestream.config import load_settings
from icestream.errors import JarError

pytestmark = pytest.mark.unit


def make_jar(path: Path, entries: tuple[str, ...]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for entry in entries:
            archive.writestr(entry, b"\xca\xfe\xba\xbe")
    return path


@pytest.fixture
def runtime_jar(tmp_path: Path) -> Path:
    return make_jar(tmp_path / "iceberg-runtime.jar", jars.RUNTIME_MARKERS)


@pytest.fixture
def jackson_jar(tmp_path: Path) -> Path:
    return make_jar(tmp_path / "jackson.jar", jars.JACKSON_MARKERS)


def test_explicit_paths_come_first(tmp_path: Path, runtime_jar: Path, jackson_jar: Path) -> None:
    settings = load_settings(iceberg_jars=f"{runtime_jar},{jackson_jar}", jar_cache_dir=str(tmp_path / "cache"))
    plan = jars.resolve_jars(settings)
    assert plan.source == "configured path"
    assert plan.jars == (runtime_jar, jackson_jar)
    assert plan.spark_conf() == {"spark.jars": f"{runtime_jar},{jackson_jar}"}


def test_explicit_path_that_does_not_exist(tmp_path: Path) -> None:
    settings = load_settings(iceberg_jars=str(tmp_path / "nope.jar"))
    with pytest.raises(JarError, match=r"not found: .*nope\.jar.*ICESTREAM_ICEBERG_JARS"):
        jars.resolve_jars(settings)


def test_explicit_jar_that_is_not_a_zip(tmp_path: Path, jackson_jar: Path) -> None:
    broken = tmp_path / "broken.jar"
    broken.write_bytes(b"<html>404 Not Found</html>")
    settings = load_settings(iceberg_jars=f"{broken},{jackson_jar}")
    with pytest.raises(JarError, match="not a readable jar"):
        jars.resolve_jars(settings)


def test_runtime_without_relocated_jackson_is_named(runtime_jar: Path) -> None:
    # The exact failure STACK.md describes: the runtime alone lacks the shaded Jackson classes.
    settings = load_settings(iceberg_jars=str(runtime_jar))
    with pytest.raises(JarError, match="relocated Jackson"):
        jars.resolve_jars(settings)


def test_cached_jars_are_used_before_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    settings = load_settings(jar_cache_dir=str(cache))
    make_jar(cache / jars.runtime_jar_name(settings.iceberg_version), jars.RUNTIME_MARKERS)
    make_jar(cache / jars.jackson_jar_name(), jars.JACKSON_MARKERS)
    monkeypatch.setattr(jars, "build_jars", lambda _: pytest.fail("must not build when cached"))
    plan = jars.resolve_jars(settings)
    assert plan.source == "cache"
    assert [path.parent for path in plan.jars] == [cache, cache]


def test_maven_when_configuration_asks() -> None:
    local = jars.resolve_jars(load_settings(jar_source="maven"))
    assert local.packages == ("org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2",)
    aws = jars.resolve_jars(load_settings(profile="aws", warehouse="s3://b/w"))
    assert aws.source == "maven"
    assert "org.apache.iceberg:iceberg-aws-bundle:1.10.2" in aws.packages
    assert aws.spark_conf()["spark.jars.packages"].count("org.apache.iceberg") == 2


def test_provided_adds_nothing_the_platform_brings_iceberg() -> None:
    plan = jars.resolve_jars(load_settings(jar_source="provided"))
    assert plan.source == "provided"
    assert plan.spark_conf() == {}
    assert plan.notes  # the doctor shows what happens instead: a check at start-up


def test_missing_wheel_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jars.importlib.util, "find_spec", lambda name: None)
    settings = load_settings(jar_cache_dir=str(tmp_path / "empty"))
    with pytest.raises(JarError, match=r"pip install snowpark-connect-deps-iceberg==1\.0\.3"):
        jars.resolve_jars(settings)


def test_missing_jarjar_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jars, "JARJAR_CANDIDATES", ("/nonexistent/jarjar.jar",))
    monkeypatch.delenv("ICESTREAM_JARJAR", raising=False)
    with pytest.raises(JarError, match="apt-get install libjarjar-java"):
        jars.find_jarjar()


def test_nothing_cached_and_building_not_allowed(tmp_path: Path) -> None:
    settings = load_settings(jar_cache_dir=str(tmp_path / "empty"))
    with pytest.raises(JarError, match="icestream doctor"):
        jars.resolve_jars(settings, build=False)
