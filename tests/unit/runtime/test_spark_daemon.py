"""The Python worker daemon keeps Spark's archives off the import path and preloads what read tasks import."""

from __future__ import annotations

from icestream.runtime.spark_daemon import PRELOADED, is_spark_archive, preload, without_spark_archives

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


def test_each_collection_after_a_task_freezes_what_survived_it() -> None:
    from icestream.runtime.spark_daemon import FreezingCollector

    class Recorder:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def collect(self, *args: int) -> int:
            self.calls.append(f"collect{args}")
            return 7

        def freeze(self) -> None:
            self.calls.append("freeze")

        def isenabled(self) -> bool:
            return True

    recorder = Recorder()
    collector = FreezingCollector(recorder)
    assert collector.collect() == 7
    assert collector.collect(1) == 7
    assert recorder.calls == ["collect()", "freeze", "collect(1,)", "freeze"]
    assert collector.isenabled(), "everything else is gc's own"


def test_after_a_freeze_a_collection_walks_only_new_objects() -> None:
    import gc

    from icestream.runtime.spark_daemon import FreezingCollector

    held = [[n] for n in range(50_000)]  # a worker's imports and caches, alive for its life
    assert {id(item) for item in held} <= {id(item) for item in gc.get_objects()}, "tracked before"
    try:
        FreezingCollector().collect()
        assert gc.get_freeze_count() >= len(held)
        walked = {id(item) for item in gc.get_objects()}  # what the next collection walks
        assert not walked & {id(item) for item in held}
        fresh = [[n] for n in range(10)]
        walked = {id(item) for item in gc.get_objects()}
        assert {id(item) for item in fresh} <= walked, "what a task allocates later is still collected"
    finally:
        gc.unfreeze()  # this test process goes on as before


def test_every_module_the_daemon_preloads_exists() -> None:
    """A renamed module would not fail a read task, only make every worker import it again: it fails here."""
    assert "icestream.ingest.reading.task_function" in PRELOADED
    assert preload() == []
    assert preload(("pyarrow", "icestream.no_such_module")) == ["icestream.no_such_module"]
