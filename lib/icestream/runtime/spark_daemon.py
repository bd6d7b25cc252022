"""The Python daemon Spark forks its Python workers from: ``pyspark.daemon`` after two fixes.

Spark starts Python workers with ``pyspark.zip``, ``py4j-*.zip`` and the spark-core jar at the head
of ``PYTHONPATH``. On Python 3.11, every task's ``importlib.invalidate_caches()`` (pyspark's
worker calls it per task) re-reads the central directory of every zip archive an import has touched,
once per package imported from it: measured here 70-150 ms of CPU per task, a quarter of a read
task's time, most of it for the spark-core jar, which holds no Python at all.

With pyspark and py4j installed as packages (pip or conda, as in this project), those archives
only repeat what site-packages already holds, so this daemon takes them off ``sys.path`` before
importing pyspark: the same code is imported from plain directories and no archive is opened.
Where they are the only copy (a Spark distribution without the packages), they stay, moved to the
end.

A reused worker runs ``gc.collect()`` after every task, a full collection that walks every object
the worker holds: pyspark, pyarrow, pandas, botocore's service models, the cached Kinesis client.
That was nine tenths of the workers' CPU at the stream's tip (py-spy, 4 read tasks a second, about
0.1 s each; ``bench/bench_batch_cost.py``). Here each of those collections is followed by
``gc.freeze()``: what survived it (imports and caches, alive for the worker's life) moves to the
permanent generation, so the next collection walks only what the task since allocated. Memory is
still freed by reference counting as before; only a reference cycle that survived a collection and
became garbage afterwards would stay, and a task's rows, its one large allocation, hold no cycles.

Every worker is forked from this daemon, and a read task's first act in a new worker was to import
pyarrow, boto3 and the reader (about a second of CPU per worker, paid again by every process that
starts an ingest): the daemon imports them once before it forks (:data:`PRELOADED`), and each worker
starts with them.

Enabled for local masters by :func:`icestream.runtime.spark.session_conf` through Spark's
``spark.python.daemon.module`` setting.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

# What a read task imports (ingest.read_job's mapInArrow): Spark's Arrow serializer, pyarrow, pandas
# (its first batch converts through pyarrow's pandas layer), the distutils that pyspark's pyarrow version
# check imports (Python's own since make leaves setuptools out of the venv; its shim and pkg_resources were
# 170 modules), the reader, and the Kinesis client's botocore and boto3. Imported in the daemon once,
# shared by every worker.
PRELOADED = (
    "pyarrow",
    "pyarrow.pandas_compat",
    "pandas",
    "pyspark.sql.pandas.serializers",
    "distutils.version",
    "boto3",
    "botocore.client",
    "icestream.ingest.reading.task_function",
)


def preload(modules: tuple[str, ...] = PRELOADED) -> list[str]:
    """Import ``modules`` into the daemon; return those that could not be (a worker imports them as before)."""
    import importlib
    import warnings

    missing = []
    for name in modules:
        try:
            with warnings.catch_warnings():
                # What pyspark imports warns as pyspark's when pyspark imports it (Python 3.11's own
                # distutils is deprecated): not a warning about this daemon.
                warnings.simplefilter("ignore", DeprecationWarning)
                importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def is_spark_archive(entry: str) -> bool:
    """True for the zip and jar files Spark puts on a worker's path (not Python's own stdlib zip)."""
    name = os.path.basename(entry)
    return name.endswith(".jar") or name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip"))


def without_spark_archives(path: list[str]) -> list[str]:
    """``path`` without Spark's archives if pyspark and py4j are installed as packages, else with
    them moved to the end (so they are opened only for what nothing else provides)."""
    from importlib.machinery import PathFinder

    plain = [entry for entry in path if not is_spark_archive(entry)]
    if all(PathFinder.find_spec(name, plain) is not None for name in ("pyspark", "py4j")):
        return plain
    return plain + [entry for entry in path if is_spark_archive(entry)]


class FreezingCollector:
    """``gc`` as pyspark's daemon uses it, except that ``collect()`` freezes what survived it."""

    def __init__(self, collector: Any = gc) -> None:
        self._collector = collector

    def collect(self, *args: Any) -> int:
        """Collect the young objects as usual, then freeze the survivors (see the module docstring)."""
        found = self._collector.collect(*args)
        self._collector.freeze()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collector, name)


def main() -> None:
    """Fix ``sys.path`` and the per-task collection, then run pyspark's daemon as Spark would."""
    removed = [entry for entry in sys.path if entry not in without_spark_archives(sys.path)]
    sys.path[:] = without_spark_archives(sys.path)
    # Finding this module already made importers for the archives; they would be re-read too.
    for key in list(sys.path_importer_cache):
        if any(key == archive or key.startswith(archive + os.sep) for archive in removed):
            del sys.path_importer_cache[key]
    from pyspark import daemon

    # The module's own name for gc: only the daemon's loop uses it. The stand-in has the two calls it makes,
    # not the gc module's type.
    daemon.gc = FreezingCollector()  # type: ignore[assignment]
    preload()
    daemon.manager()


if __name__ == "__main__":
    main()
