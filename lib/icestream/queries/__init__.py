"""Questions asked of the tables: real-time metrics, table health, the ingest's report, a look at
the stream beyond the committed positions, anomaly detection, and the same tables read by DuckDB and
pyiceberg.

The modules ``realtime``, ``health``, ``file_skipping``, ``anomaly``, ``aggregate_dashboard``,
``streaming``, ``duckdb_engine`` and ``pyiceberg_engine`` are offered as modules
(``realtime.kpi_dashboard(...)`` reads as what it is); the ingest's report and what notebook 08
uses of ``anomaly`` are offered by name. Everything is loaded on first use: DuckDB and pyiceberg
load only where they are asked for.
"""

from __future__ import annotations

from icestream.face import Face

_FACE = Face(
    __name__,
    {
        "DetectorOptions": "icestream.queries.anomaly.detector",
        "batch_freshness": "icestream.queries.report",
        "committed_positions": "icestream.queries.report",
        "flagged_intervals": "icestream.queries.anomaly.detector",
        "freshness": "icestream.queries.report",
        "percentiles": "icestream.queries.report",
        "positions_statement": "icestream.queries.report",
        "progress_frame": "icestream.queries.report",
        "rejects_by_reason": "icestream.queries.report",
        "score_windows": "icestream.queries.anomaly.detector",
        "shard_lag_frame": "icestream.queries.report",
        "uncommitted": "icestream.queries.live",
        "window_counts": "icestream.queries.anomaly.detector",
        "write_call": "icestream.queries.report",
    },
    modules=(
        "aggregate_dashboard",
        "anomaly",
        "duckdb_engine",
        "file_skipping",
        "health",
        "pyiceberg_engine",
        "realtime",
        "streaming",
    ),
)
__all__ = _FACE.names
__getattr__ = _FACE.get
__dir__ = _FACE.dir
