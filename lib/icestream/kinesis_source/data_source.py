"""``spark.readStream.format("kinesis")``: the Kinesis source open-source PySpark lacks, as a Python data source.

Register it once per session (sessions from ``icestream.get_spark()`` have it already)::

    spark.dataSource.register(icestream.KinesisDataSource)
    events = (
        spark.readStream.format("kinesis")
        .option("streamName", "events").option("regionName", "us-east-1")
        .option("startingPosition", "latest")  # or trim_horizon, at_timestamp:<time>, or shard positions
        .load()
    )

It needs Spark 4 (the Python data source API); it reads on Spark's executors, and a query's offsets
are per-shard positions in Spark's own checkpoint (:mod:`~icestream.kinesis_source.stream_reader`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource

from icestream.kinesis_source.options import parse_options
from icestream.kinesis_source.rows import SCHEMA_DDL
from icestream.kinesis_source.stream_reader import KinesisStreamReader
from icestream.runtime.shipping import ENV_ALIAS, EXECUTOR_PYTHON


class KinesisDataSource(DataSource):
    """The ``kinesis`` source (the module docstring shows its use; docs/kinesis-source.md its options)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.source_options = parse_options(options)  # a bad option stops the query here, before it starts

    @classmethod
    def name(cls) -> str:
        return "kinesis"

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema: Any) -> KinesisStreamReader:  # noqa: N802 - Spark's name
        return KinesisStreamReader(self.source_options)


def register(spark: Any) -> None:
    """Make ``format("kinesis")`` known to ``spark`` (again is harmless).

    Spark runs a Python data source with one interpreter path on the driver (where it plans each
    batch) and on the executors (where it reads). A session that ships icestream's packed
    environment names the executors' copy, ``./icestream_env/bin/python``, relative to each
    executor's working folder; on the driver that path is made to lead to the driver's own
    environment, by a link ``icestream_env`` in its working folder, unless the name is taken.
    """
    if spark.sparkContext.pythonExec == EXECUTOR_PYTHON:
        link_driver_environment(Path.cwd())
    spark.dataSource.register(KinesisDataSource)


def link_driver_environment(folder: Path) -> None:
    """Let ``./icestream_env/bin/python`` run, from ``folder``, the Python this driver runs in."""
    link = folder / ENV_ALIAS
    if link.is_symlink() or link.exists():
        return  # an earlier session's link, or a folder of the user's: left alone
    os.symlink(Path(sys.prefix), link, target_is_directory=True)
