"""icestream: Kinesis -> PySpark -> Apache Iceberg, as a notebook workbook.

The package's faces, each with ``__all__`` (docs/design.md draws them):

- ``icestream``: settings, the Spark session, identifiers, timestamps and the project's errors;
- ``icestream.stream``: Kinesis streams and shards; ``icestream.synthetic`` and ``icestream.producer``:
  the workbook's events and sending them;
- ``icestream.ingest``: the streaming ingest; ``icestream.load``: files into tables;
- ``icestream.lake``: the Iceberg tables (DDL, layout, time travel, maintenance);
- ``icestream.queries``: real-time, health, the ingest's report, anomalies, DuckDB and pyiceberg;
- ``icestream.demos``: the workbook's scenarios, each checked against its ground truth;
- ``icestream.plots``: the notebooks' charts.

Notebooks, scripts and schedulers import from these faces only; the modules behind them may move.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Name -> the module that defines it. Looked up on first use, so that ``import icestream`` (every
# Spark executor and child process does it) starts neither the JVM gateway nor pandas.
_FACE = {
    "Settings": "icestream.config",
    "load_settings": "icestream.config",
    "validate_identifier": "icestream.validation",
    "get_spark": "icestream.runtime.spark",
    "to_micros": "icestream.timestamps",
    "IcestreamError": "icestream.errors",
    "ConfigError": "icestream.errors",
}

__all__ = ["ConfigError", "IcestreamError", "Settings", "__version__", "get_spark", "load_settings", "to_micros",
           "validate_identifier"]  # fmt: skip

if TYPE_CHECKING:
    from icestream.config import Settings, load_settings
    from icestream.errors import ConfigError, IcestreamError
    from icestream.runtime.spark import get_spark
    from icestream.timestamps import to_micros
    from icestream.validation import validate_identifier


def __getattr__(name: str) -> Any:
    if name not in _FACE:
        raise AttributeError(f"module 'icestream' has no attribute {name!r}")
    return getattr(importlib.import_module(_FACE[name]), name)


def __dir__() -> list[str]:
    return sorted(__all__)
