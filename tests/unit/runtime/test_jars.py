"""Jar provisioning: the resolution order and one clear error for each way it can go wrong."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from icestream.config import load_settings
from icestream.errors import JarError
from icestream.runtime import jars
from icestream.stack import spark_line


def make_jar(path: Path, entries: tuple[str, ...]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for entry in entries:
            archive.writestr(entry, b"\xca\xfe\xba\xbe")
    return path


# What a stripped copy of the runtime holds (a Python wheel shipped one): Iceberg's own classes, its shaded
# Jackson and HttpClient 5 stripped.
STRIPPED = tuple(entry for entry in jars.RUNTIME_CLASSES if "/shaded/" not in entry)


@pytest.fixture
def runtime_jar(tmp_path: Path) -> Path:
    return make_jar(tmp_path / "iceberg-runtime.jar", tuple(jars.RUNTIME_CLASSES))


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


def test_explicit_paths_come_first(tmp_path: Path, runtime_jar: Path) -> None:
    extra = make_jar(tmp_path / "extra.jar", ("org/example/Extra.class",))
    settings = load_settings(
        iceberg_jars=f"{runtime_jar},{extra}", jar_cache_dir=str(tmp_path / "cache"), catalog_type="hadoop"
    )
    plan = jars.resolve_jars(settings)
    assert plan.source == "configured path"
    assert plan.jars == (runtime_jar, extra)
    assert plan.spark_conf() == {"spark.jars": f"{runtime_jar},{extra}"}


def test_explicit_path_that_does_not_exist(tmp_path: Path) -> None:
    settings = load_settings(iceberg_jars=str(tmp_path / "nope.jar"))
    with pytest.raises(JarError, match=r"not found: .*nope\.jar.*ICESTREAM_ICEBERG_JARS"):
        jars.resolve_jars(settings)


def test_explicit_jar_that_is_not_a_zip(tmp_path: Path, runtime_jar: Path) -> None:
    broken = tmp_path / "broken.jar"
    broken.write_bytes(b"<html>404 Not Found</html>")
    settings = load_settings(iceberg_jars=f"{runtime_jar},{broken}")
    with pytest.raises(JarError, match="not a readable jar"):
        jars.resolve_jars(settings)


def test_a_stripped_runtime_names_what_it_lacks(tmp_path: Path) -> None:
    # A jar like 1.0.3's: the first CREATE TABLE would fail with ClassNotFoundException ...JsonFactoryBuilder.
    stripped = make_jar(tmp_path / "iceberg-runtime.jar", STRIPPED)
    with pytest.raises(JarError, match=r"shaded Jackson.*shaded HttpClient 5") as error:
        jars.resolve_jars(load_settings(iceberg_jars=str(stripped), catalog_type="hadoop"))
    assert "Maven Central" in str(error.value)


def test_the_classes_may_come_from_several_jars(tmp_path: Path) -> None:
    own = make_jar(tmp_path / "iceberg-own.jar", STRIPPED)
    shaded = make_jar(tmp_path / "shaded.jar", tuple(set(jars.RUNTIME_CLASSES) - set(STRIPPED)))
    assert jars.missing_classes(own, shaded) == []
    jars.check_jars((own, shaded))


def test_maven_when_configuration_asks() -> None:
    line = spark_line()
    local = jars.resolve_jars(load_settings(jar_source="maven", catalog_type="hadoop"))
    assert local.packages == tuple(package.coordinate for package in line.packages if package.when == "always")
    assert line.runtime.coordinate in local.packages
    assert not any("iceberg-aws-bundle" in coordinate for coordinate in local.packages)
    aws = jars.resolve_jars(load_settings(profile="aws", warehouse="s3://b/w"))
    assert aws.source == "maven"
    assert f"org.apache.iceberg:iceberg-aws-bundle:{line.iceberg}" in aws.packages
    assert aws.spark_conf()["spark.jars.packages"].count("org.apache.iceberg") == 2


def test_the_iceberg_version_setting_moves_every_iceberg_package_and_nothing_else() -> None:
    plan = jars.resolve_jars(
        load_settings(jar_source="maven", profile="aws", warehouse="s3://b/w", iceberg_version="1.10.0")
    )
    iceberg = [coordinate for coordinate in plan.packages if coordinate.startswith("org.apache.iceberg:")]
    assert len(iceberg) == 2
    assert all(coordinate.endswith(":1.10.0") for coordinate in iceberg)
    others = [coordinate for coordinate in plan.packages if not coordinate.startswith("org.apache.iceberg:")]
    assert others == [p.coordinate for p in spark_line().packages if p.group != "org.apache.iceberg"]


def test_provided_adds_no_iceberg_jar_the_platform_brings_iceberg() -> None:
    plan = jars.resolve_jars(load_settings(jar_source="provided", catalog_type="hadoop"))
    assert plan.source == "provided"
    assert plan.spark_conf() == {}
    assert plan.notes  # the doctor shows what happens instead: a check at start-up
    # A JDBC catalog still needs its database driver, which no platform brings.
    with_jdbc = jars.resolve_jars(load_settings(jar_source="provided", catalog_type="jdbc"))
    assert with_jdbc.spark_conf() == {"spark.jars": str(jars.sqlite_jdbc_driver(load_settings())[0])}


def test_nothing_cached_and_copying_not_allowed(tmp_path: Path) -> None:
    settings = load_settings(jar_cache_dir=str(tmp_path / "empty"))
    with pytest.raises(JarError, match="make setup"):
        jars.resolve_jars(settings, copy=False)


def test_the_jdbc_catalog_adds_the_sqlite_driver_and_its_native_folder(
    runtime_jar: Path, sqlite_jar: Path, native_folder: Path
) -> None:
    settings = load_settings(iceberg_jars=str(runtime_jar), sqlite_jdbc_jar=str(sqlite_jar))
    assert settings.catalog_type == "jdbc"
    plan = jars.resolve_jars(settings)
    assert plan.jars == (runtime_jar, sqlite_jar)
    assert plan.library_path == (str(native_folder),)
    assert plan.spark_conf()["spark.jars"].endswith(f",{sqlite_jar}")


def test_an_upstream_driver_bundles_its_natives(tmp_path: Path, runtime_jar: Path) -> None:
    upstream = make_jar(
        tmp_path / "sqlite-jdbc-3.46.jar",
        (jars.SQLITE_DRIVER_MARKER, "org/sqlite/native/Linux/x86_64/libsqlitejdbc.so"),
    )
    settings = load_settings(iceberg_jars=str(runtime_jar), sqlite_jdbc_jar=str(upstream))
    assert jars.sqlite_jdbc_driver(settings) == (upstream, ())


def test_maven_with_the_jdbc_catalog_still_needs_the_local_driver(sqlite_jar: Path, native_folder: Path) -> None:
    plan = jars.resolve_jars(load_settings(jar_source="maven", sqlite_jdbc_jar=str(sqlite_jar)))
    assert (plan.jars, plan.library_path) == ((sqlite_jar,), (str(native_folder),))
    excludes = jars.maven_excludes(load_settings())  # the 4.1 line's Kafka connector excludes one; 3.5's none
    expected = {"spark.jars", "spark.jars.packages"} | ({"spark.jars.excludes"} if excludes else set())
    assert set(plan.spark_conf()) == expected
    assert plan.spark_conf().get("spark.jars.excludes") == (",".join(excludes) or None)


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


def test_other_catalogs_need_no_driver(runtime_jar: Path) -> None:
    settings = load_settings(iceberg_jars=str(runtime_jar), catalog_type="hadoop", sqlite_jdbc_jar="/no")
    assert jars.resolve_jars(settings).library_path == ()
