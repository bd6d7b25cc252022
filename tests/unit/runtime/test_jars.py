"""Jar provisioning: the resolution order and one clear error for each way it can go wrong."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from icestream.config import load_settings
from icestream.errors import JarError
from icestream.runtime import jars


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


@pytest.fixture
def sqlite_jar(tmp_path: Path) -> Path:
    """A stand-in for Debian's sqlite-jdbc.jar: the driver class, no bundled natives."""
    return make_jar(tmp_path / "sqlite-jdbc.jar", (jars.SQLITE_DRIVER_MARKER,))


@pytest.fixture
def native_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for Debian's libxerial-sqlite-jdbc-jni folder."""
    folder = tmp_path / "usr" / "lib" / "x86_64-linux-gnu" / "jni"
    folder.mkdir(parents=True)
    (folder / jars.SQLITE_NATIVE_LIBRARY).write_bytes(b"\x7fELF")
    monkeypatch.setattr(jars, "SQLITE_NATIVE_FOLDERS", (str(tmp_path / "usr" / "lib" / "*" / "jni"),))
    return folder


def test_explicit_paths_come_first(tmp_path: Path, runtime_jar: Path, jackson_jar: Path) -> None:
    settings = load_settings(
        iceberg_jars=f"{runtime_jar},{jackson_jar}", jar_cache_dir=str(tmp_path / "cache"), catalog_type="hadoop"
    )
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
    # The exact failure docs/stack.md describes: the runtime alone lacks the shaded Jackson classes.
    settings = load_settings(iceberg_jars=str(runtime_jar))
    with pytest.raises(JarError, match="relocated Jackson"):
        jars.resolve_jars(settings)


def test_cached_jars_are_used_before_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    settings = load_settings(jar_cache_dir=str(cache), catalog_type="hadoop")
    make_jar(cache / jars.runtime_jar_name(settings.iceberg_version), jars.RUNTIME_MARKERS)
    make_jar(cache / jars.jackson_jar_name(), jars.JACKSON_MARKERS)
    monkeypatch.setattr(jars, "build_jars", lambda _: pytest.fail("must not build when cached"))
    plan = jars.resolve_jars(settings)
    assert plan.source == "cache"
    assert [path.parent for path in plan.jars] == [cache, cache]


def test_maven_when_configuration_asks() -> None:
    local = jars.resolve_jars(load_settings(jar_source="maven", catalog_type="hadoop"))
    assert local.packages == ("org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2",)
    aws = jars.resolve_jars(load_settings(profile="aws", warehouse="s3://b/w"))
    assert aws.source == "maven"
    assert "org.apache.iceberg:iceberg-aws-bundle:1.10.2" in aws.packages
    assert aws.spark_conf()["spark.jars.packages"].count("org.apache.iceberg") == 2


def test_provided_adds_no_iceberg_jar_the_platform_brings_iceberg() -> None:
    plan = jars.resolve_jars(load_settings(jar_source="provided", catalog_type="hadoop"))
    assert plan.source == "provided"
    assert plan.spark_conf() == {}
    assert plan.notes  # the doctor shows what happens instead: a check at start-up
    # A JDBC catalog still needs its database driver, which no platform brings.
    with_jdbc = jars.resolve_jars(load_settings(jar_source="provided", catalog_type="jdbc"))
    assert with_jdbc.spark_conf() == {"spark.jars": str(jars.sqlite_jdbc_driver(load_settings())[0])}


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


def test_the_jdbc_catalog_adds_the_sqlite_driver_and_its_native_folder(
    runtime_jar: Path, jackson_jar: Path, sqlite_jar: Path, native_folder: Path
) -> None:
    settings = load_settings(iceberg_jars=f"{runtime_jar},{jackson_jar}", sqlite_jdbc_jar=str(sqlite_jar))
    assert settings.catalog_type == "jdbc"
    plan = jars.resolve_jars(settings)
    assert plan.jars == (runtime_jar, jackson_jar, sqlite_jar)
    assert plan.library_path == (str(native_folder),)
    assert plan.spark_conf()["spark.jars"].endswith(f",{sqlite_jar}")


def test_an_upstream_driver_bundles_its_natives(tmp_path: Path, runtime_jar: Path, jackson_jar: Path) -> None:
    upstream = make_jar(
        tmp_path / "sqlite-jdbc-3.46.jar",
        (jars.SQLITE_DRIVER_MARKER, "org/sqlite/native/Linux/x86_64/libsqlitejdbc.so"),
    )
    settings = load_settings(iceberg_jars=f"{runtime_jar},{jackson_jar}", sqlite_jdbc_jar=str(upstream))
    assert jars.sqlite_jdbc_driver(settings) == (upstream, ())


def test_maven_with_the_jdbc_catalog_still_needs_the_local_driver(sqlite_jar: Path, native_folder: Path) -> None:
    plan = jars.resolve_jars(load_settings(jar_source="maven", sqlite_jdbc_jar=str(sqlite_jar)))
    assert (plan.jars, plan.library_path) == ((sqlite_jar,), (str(native_folder),))
    assert set(plan.spark_conf()) == {"spark.jars", "spark.jars.packages"}


@pytest.mark.parametrize("problem", ["missing", "not a jar", "not the driver", "no natives"])
def test_a_missing_sqlite_driver_names_the_debian_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str
) -> None:
    jar = tmp_path / "sqlite-jdbc.jar"
    if problem == "not a jar":
        jar.write_text("<html>404</html>")
    elif problem == "not the driver":
        make_jar(jar, ("org/example/Other.class",))
    elif problem == "no natives":
        make_jar(jar, (jars.SQLITE_DRIVER_MARKER,))
        monkeypatch.setattr(jars, "SQLITE_NATIVE_FOLDERS", (str(tmp_path / "no-such-folder"),))
    settings = load_settings(sqlite_jdbc_jar=str(jar))
    with pytest.raises(
        JarError, match=r"apt-get install libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni"
    ) as error:
        jars.sqlite_jdbc_driver(settings)
    assert "ICESTREAM_SQLITE_JDBC_JAR" in str(error.value)
    assert "ICESTREAM_CATALOG_TYPE=hadoop" in str(error.value)


def test_other_catalogs_need_no_driver(runtime_jar: Path, jackson_jar: Path) -> None:
    settings = load_settings(iceberg_jars=f"{runtime_jar},{jackson_jar}", catalog_type="hadoop", sqlite_jdbc_jar="/no")
    assert jars.resolve_jars(settings).library_path == ()
