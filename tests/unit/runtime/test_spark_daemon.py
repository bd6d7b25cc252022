"""The Python worker daemon keeps Spark's zip and jar archives off the import path."""

from __future__ import annotations

from icestream.runtime.spark_daemon import is_spark_archive, without_spark_archives

LIB = "/opt/venv/lib/python3.11/site-packages/pyspark/python/lib"


def test_spark_archives_are_recognised_and_pythons_own_zip_is_not() -> None:
    assert is_spark_archive(f"{LIB}/pyspark.zip")
    assert is_spark_archive(f"{LIB}/py4j-0.10.9.7-src.zip")
    assert is_spark_archive("/opt/venv/lib/python3.11/site-packages/pyspark/jars/spark-core_2.12-3.5.8.jar")
    assert not is_spark_archive("/usr/lib/python311.zip")
    assert not is_spark_archive("/opt/venv/lib/python3.11/site-packages")


def test_archives_are_dropped_when_the_packages_are_installed() -> None:
    import sys

    archives = [f"{LIB}/pyspark.zip", f"{LIB}/py4j-0.10.9.7-src.zip"]
    path = [*archives, *sys.path]  # this interpreter has pyspark and py4j installed
    assert without_spark_archives(path) == [entry for entry in sys.path if not is_spark_archive(entry)]


def test_archives_move_to_the_end_when_they_are_the_only_copy(tmp_path) -> None:
    path = [f"{LIB}/pyspark.zip", str(tmp_path), f"{LIB}/py4j-0.10.9.7-src.zip"]
    assert without_spark_archives(path) == [str(tmp_path), f"{LIB}/pyspark.zip", f"{LIB}/py4j-0.10.9.7-src.zip"]
