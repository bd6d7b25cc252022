"""icestream: Kinesis -> PySpark -> Apache Iceberg, as a notebook workbook.

Notebooks, scripts and schedulers import from six faces, each a package whose ``__all__`` says what
it offers (docs/design.md lists every name):

- ``icestream``: the job: settings, the Spark session and its JVM packages, the streaming ingest and
  its committed positions, the ``kinesis`` source for ``spark.readStream`` with its exactly-once
  writer, instants as epoch microseconds, the SQL-name check;
- ``icestream.kinesis``: Kinesis streams and shards;
- ``icestream.lake``: the Iceberg tables (``LakeTable``, creating them, statements, windows);
- ``icestream.queries``: real-time, health, the ingest's report, anomalies, DuckDB and pyiceberg;
- ``icestream.plots``: the notebooks' charts;
- ``icestream.demos``: what only the workbook's lessons need: the synthetic events and their ground
  truth, producing them, and the scenarios.

Every face looks its names up on first use (:mod:`icestream.face` says why); the modules behind them
may move.
"""

from __future__ import annotations

from icestream.face import Face

__version__ = "0.1.0"

_FACE = Face(
    __name__,
    {
        "KinesisDataSource": "icestream.kinesis_source.data_source",
        "PositionedAppend": "icestream.kinesis_source.positioned",
        "get_spark": "icestream.kinesis_source.session",
        "kafka_connection": "icestream.kafka.connection",
        "load_committed": "icestream.ingest.positions",
        "load_settings": "icestream.config",
        "maven_excludes": "icestream.runtime.jars",
        "maven_packages": "icestream.runtime.jars",
        "shard_lag": "icestream.kinesis_source.progress",
        "start_ingest": "icestream.ingest.query",
        "starting_positions": "icestream.kinesis_source.positioned",
        "to_micros": "icestream.timestamps",
        "validate_identifier": "icestream.validation",
    },
)
__all__ = _FACE.names
__getattr__ = _FACE.get
__dir__ = _FACE.dir
