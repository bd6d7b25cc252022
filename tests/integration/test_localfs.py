"""The local master's ``file:`` file system: permissions through java.nio, no chmod (icestream.runtime.localfs)."""

from __future__ import annotations

import dataclasses
import stat
import zipfile
from pathlib import Path

from icestream.config import Settings, load_settings
from icestream.runtime import localfs


def hadoop_file_system(spark, uri: str):
    jvm = spark.sparkContext._jvm
    return jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(uri), spark.sparkContext._jsc.hadoopConfiguration())


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_local_session_uses_the_nio_file_system(spark) -> None:
    system = hadoop_file_system(spark, "file:///")
    assert system.getClass().getName() == localfs.FILE_SYSTEM_CLASS
    assert system.getRawFileSystem().getClass().getName() == "icestream.hadoop.NioRawLocalFileSystem"
    assert spark.conf.get("spark.hadoop.fs.file.impl") == localfs.FILE_SYSTEM_CLASS


def test_files_and_folders_get_hadoops_permissions(spark, tmp_path: Path) -> None:
    """What Hadoop asks for is what the file system holds: creates, mkdirs and explicit modes."""
    jvm = spark.sparkContext._jvm
    system = hadoop_file_system(spark, "file:///")
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission

    folder = tmp_path / "a" / "b"
    assert system.mkdirs(jvm.org.apache.hadoop.fs.Path(folder.as_uri()), permission(0o750))
    assert mode(folder) == 0o750 & ~0o022  # Hadoop applies its umask (022) to the mode asked for

    file = folder / "part-0.parquet"
    stream = system.create(jvm.org.apache.hadoop.fs.Path(file.as_uri()), False)
    stream.write(bytearray(b"data"))
    stream.close()
    assert file.read_bytes() == b"data"
    assert mode(file) == 0o644  # Hadoop's default for a new file (666) under its umask
    assert (folder / ".part-0.parquet.crc").is_file()  # still the checksummed file system

    for wanted in (0o600, 0o755, 0o000, 0o777, 0o640):
        system.setPermission(jvm.org.apache.hadoop.fs.Path(file.as_uri()), permission(wanted))
        assert mode(file) == wanted
    # Modes beyond rwxrwxrwx (here the sticky bit) go through Hadoop's own way.
    system.setPermission(jvm.org.apache.hadoop.fs.Path(folder.as_uri()), permission(0o1777))
    assert folder.stat().st_mode & 0o7777 == 0o1777


def test_the_jar_is_built_from_the_sources(tmp_path: Path) -> None:
    built = localfs.build_jar(tmp_path / "localfs.jar")
    with zipfile.ZipFile(built) as archive:
        names = archive.namelist()
    assert sorted(names) == sorted(localfs.CLASS_ENTRIES)
    assert list(tmp_path.iterdir()) == [built]  # no scratch folder left behind


def test_only_a_local_master_with_the_setting_on_gets_it(settings: Settings) -> None:
    assert localfs.local_fs_conf(load_settings(spark_master="spark://127.0.0.1:7077")) == {}
    assert localfs.local_fs_conf(load_settings(fast_local_fs=False)) == {}
    conf = localfs.local_fs_conf(dataclasses.replace(settings, fast_local_fs=True))
    assert conf["spark.hadoop.fs.file.impl"] == localfs.FILE_SYSTEM_CLASS
    assert Path(conf["spark.driver.extraClassPath"]).name == localfs.jar_name()


def test_a_failed_build_keeps_hadoops_default(settings: Settings, tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(localfs, "SOURCE_FOLDER", tmp_path)
    (tmp_path / "Broken.java").write_text("package icestream.hadoop; public class Broken extends Missing {}")
    private = load_settings(jar_cache_dir=str(tmp_path / "jars"), fast_local_fs=True)
    assert localfs.local_fs_conf(private) == {}
    assert "default local file system stays in use" in caplog.text
    assert not list((tmp_path / "jars").glob("*.jar"))
