"""Questions asked of the tables: real-time metrics, table health, the ingest's report, a live look
at a running ingest, anomaly detection, and the same tables read by DuckDB and pyiceberg.

The modules ``realtime``, ``health``, ``anomaly``, ``metrics``, ``streaming``, ``duckdb_engine`` and
``pyiceberg_engine`` are part of this face (``realtime.kpi_dashboard(...)`` reads as what it is); the
ingest's report, the live look and what notebook 08 uses of ``anomaly`` are offered by name.
Everything is loaded on first use: DuckDB and pyiceberg load only where they are asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_MODULES = ("anomaly", "duckdb_engine", "health", "metrics", "pyiceberg_engine", "realtime", "streaming")
_ANOMALY = (
    "DetectorOptions",
    "flagged_intervals",
    "score_windows",
    "window_counts",
)
_LIVE = (
    "LiveFrame",
    "Uncommitted",
    "current_lag_s",
    "live_frame",
    "stream_lag_s",
    "stream_uncommitted",
    "stream_uncommitted_since",
    "uncommitted",
)
_REPORT = (
    "committed_positions",
    "freshness",
    "percentiles",
    "positions_statement",
    "progress_frame",
    "read_progress",
    "rejects_by_reason",
    "shard_lag_frame",
    "write_call",
)

__all__ = [
    "DetectorOptions",
    "LiveFrame",
    "Uncommitted",
    "anomaly",
    "committed_positions",
    "current_lag_s",
    "duckdb_engine",
    "flagged_intervals",
    "freshness",
    "health",
    "live_frame",
    "metrics",
    "percentiles",
    "positions_statement",
    "progress_frame",
    "pyiceberg_engine",
    "read_progress",
    "realtime",
    "rejects_by_reason",
    "score_windows",
    "shard_lag_frame",
    "stream_lag_s",
    "stream_uncommitted",
    "stream_uncommitted_since",
    "streaming",
    "uncommitted",
    "window_counts",
    "write_call",
]

if TYPE_CHECKING:
    from icestream.queries import anomaly, duckdb_engine, health, metrics, pyiceberg_engine, realtime, streaming
    from icestream.queries.anomaly import (
        DetectorOptions,
        flagged_intervals,
        score_windows,
        window_counts,
    )
    from icestream.queries.live import (
        LiveFrame,
        Uncommitted,
        current_lag_s,
        live_frame,
        stream_lag_s,
        stream_uncommitted,
        stream_uncommitted_since,
        uncommitted,
    )
    from icestream.queries.report import (
        committed_positions,
        freshness,
        percentiles,
        positions_statement,
        progress_frame,
        read_progress,
        rejects_by_reason,
        shard_lag_frame,
        write_call,
    )


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _ANOMALY:
        return getattr(importlib.import_module(f"{__name__}.anomaly"), name)
    if name in _LIVE:
        return getattr(importlib.import_module(f"{__name__}.live"), name)
    if name in _REPORT:
        return getattr(importlib.import_module(f"{__name__}.report"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
