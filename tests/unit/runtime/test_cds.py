"""The driver's class data sharing archive: which options a session gets, what keys an archive, how it is built."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from icestream.runtime import cds


@pytest.fixture(autouse=True)
def _not_building(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cds.BUILD_TARGET_VARIABLE, raising=False)


def test_no_archive_means_no_options(tmp_path: Path) -> None:
    assert cds.driver_options(tmp_path) == ""


def test_an_archive_for_this_java_and_class_path_is_mapped_quietly(tmp_path: Path) -> None:
    path = cds.archive_path(tmp_path)
    assert path is not None
    assert path.parent == tmp_path / cds.ARCHIVE_FOLDER
    path.parent.mkdir()
    path.write_bytes(b"archive")
    options = cds.driver_options(tmp_path).split()
    assert f"-XX:SharedArchiveFile={path}" in options
    assert "-Xshare:auto" in options, "a JVM that cannot map it starts without it"
    assert {"-Xlog:cds=off", "-Xlog:cds+dynamic=off", "-Xlog:class+path=off"} <= set(options)


def test_the_building_process_writes_instead_of_mapping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cds.BUILD_TARGET_VARIABLE, str(tmp_path / "new.jsa"))
    options = cds.driver_options(tmp_path).split()
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}" in options
    assert not any(option.startswith("-XX:SharedArchiveFile") for option in options)


def test_the_key_follows_the_extra_class_path(tmp_path: Path) -> None:
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"one")
    plain, with_jar = cds.archive_key(), cds.archive_key(str(jar))
    assert plain is not None
    assert with_jar is not None
    assert plain != with_jar
    jar.write_bytes(b"rebuilt, longer")
    assert cds.archive_key(str(jar)) != with_jar, "a rebuilt jar on the class path needs a new archive"
    assert cds.archive_key() == plain, "the same Java and Spark give the same key"


def test_the_key_follows_the_jars_spark_loads(tmp_path: Path) -> None:
    runtime, driver = tmp_path / "iceberg-runtime.jar", tmp_path / "sqlite-jdbc.jar"
    runtime.write_bytes(b"stripped")
    driver.write_bytes(b"driver")
    before = cds.archive_key(jars=f"{runtime},{driver}")
    assert before not in (None, cds.archive_key(), cds.archive_key(jars=str(driver)))
    runtime.write_bytes(b"complete, with its shaded classes")
    assert cds.archive_key(jars=f"{runtime},{driver}") != before, "another Iceberg jar needs a new archive"
    assert cds.archive_path(tmp_path, jars=f"{runtime},{driver}") != cds.archive_path(tmp_path)


def test_the_key_follows_spark_s_own_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The JVM refuses an archive once a class path jar has another size or time (pyspark reinstalled)."""
    import os

    from pyspark import find_spark_home

    (tmp_path / "jars").mkdir()
    core = tmp_path / "jars" / "spark-core_2.12-3.5.8.jar"
    core.write_bytes(b"classes")
    monkeypatch.setattr(find_spark_home, "_find_spark_home", lambda: str(tmp_path))
    before = cds.archive_key()
    os.utime(core, (core.stat().st_atime, core.stat().st_mtime + 60))
    assert cds.archive_key() not in (None, before), "the same jar names installed again need a new archive"


def test_without_java_there_is_no_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    assert cds.archive_key() is None
    assert cds.driver_options(tmp_path) == ""
    assert cds.build(tmp_path) == (None, 0.0)


def _fake_python(tmp_path: Path, body: str) -> str:
    """An interpreter stand-in that runs ``body`` (with ``target`` the file it is asked to write)."""
    script = tmp_path / "fake-python"
    script.write_text(
        f"#!{sys.executable}\nimport os, sys\ntarget = os.environ[{cds.BUILD_TARGET_VARIABLE!r}]\n{body}\n"
    )
    script.chmod(0o755)
    return str(script)


def test_build_keeps_a_finished_archive_and_drops_older_ones(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    older = cache / cds.ARCHIVE_FOLDER / "driver-0000000000000000.jsa"
    older.parent.mkdir(parents=True)
    older.write_bytes(b"old java")
    python = _fake_python(tmp_path, "open(target, 'wb').write(b'classes')")
    path, _seconds = cds.build(cache, python=python)
    assert path == cds.archive_path(cache)
    assert path.read_bytes() == b"classes"
    assert not older.exists()
    assert [entry.name for entry in path.parent.iterdir()] == [path.name], "no partial file is left"
    again = _fake_python(tmp_path, "sys.exit('an archive that exists is not built again')")
    assert cds.build(cache, python=again) == (path, 0.0)


def test_each_spark_line_keeps_its_own_archive(tmp_path: Path) -> None:
    """.ci/run builds the default line's archive, then the Spark 3.5 line's: building one dropped the other, so
    the next make test on that machine built its archive again (40 s) instead of finding it."""
    import pyspark

    line = ".".join(pyspark.__version__.split(".")[:2])
    other_line = "3.5" if line != "3.5" else "4.1"
    cache = tmp_path / "cache"
    folder = cache / cds.ARCHIVE_FOLDER
    folder.mkdir(parents=True)
    other = folder / f"driver-{other_line}-0000000000000000.jsa"
    same_line_older = folder / f"driver-{line}-0000000000000000.jsa"
    for archive in (other, same_line_older):
        archive.write_bytes(b"classes of an earlier build")
    path, _seconds = cds.build(cache, python=_fake_python(tmp_path, "open(target, 'wb').write(b'classes')"))
    assert path is not None
    assert path.name.startswith(f"driver-{line}-"), path
    assert sorted(entry.name for entry in folder.iterdir()) == sorted([other.name, path.name]), "this line's older went"


@pytest.mark.parametrize("body", ["sys.exit(3)", "open(target, 'wb').close()", "pass"])
def test_a_failed_build_leaves_nothing_behind(tmp_path: Path, body: str) -> None:
    cache = tmp_path / "cache"
    path, _seconds = cds.build(cache, python=_fake_python(tmp_path, body))
    assert path is None
    assert list((cache / cds.ARCHIVE_FOLDER).iterdir()) == []
    assert cds.driver_options(cache) == ""


@pytest.mark.parametrize(
    "option",
    ["-XX:StartFlightRecording=filename=x.jfr", "-javaagent:/opt/apm.jar", "-agentpath:/lib/p.so", "-Xshare:off"],
)
def test_an_agent_or_a_recording_or_their_own_sharing_leaves_the_archive_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    """Java Flight Recorder with the archive mapped crashed the JVM here (OpenJDK 17.0.15)."""
    path = cds.archive_path(tmp_path)
    assert path is not None
    path.parent.mkdir()
    path.write_bytes(b"archive")
    for variable in cds.JAVA_OPTION_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    assert cds.driver_options(tmp_path) != ""
    assert cds.driver_options(tmp_path, java_options=f"-Dx=1 {option}") == ""
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", option)
    assert cds.driver_options(tmp_path) == ""
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", option)
    assert cds.driver_options(tmp_path) == ""
