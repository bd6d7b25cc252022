"""Charts for the notebooks: one module per notebook topic, matplotlib only, axes labelled with units.

A module draws what the module of the same name in :mod:`icestream.queries` answers (``plots.health``
draws ``queries.health``'s report). Each chart is loaded on first use: matplotlib loads only where
one is asked for.
"""

from __future__ import annotations

from icestream.face import Face

_FACE = Face(
    __name__,
    {
        "before_after": "icestream.plots.health",
        "counts_compared": "icestream.plots.time_travel",
        "device_split": "icestream.plots.realtime",
        "events_per_minute": "icestream.plots.realtime",
        "file_size_histogram": "icestream.plots.health",
        "files_per_partition": "icestream.plots.health",
        "layout_diagram": "icestream.plots.layout",
        "live_dashboard": "icestream.plots.live",
        "metrics_growth": "icestream.plots.rowlevel",
        "modes_compared": "icestream.plots.rowlevel",
        "plot_freshness": "icestream.plots.report",
        "plot_lag": "icestream.plots.report",
        "plot_phases": "icestream.plots.report",
        "plot_rates": "icestream.plots.report",
        "rates_with_flags": "icestream.plots.anomaly",
        "watermark_progress": "icestream.plots.streaming",
    },
)
__all__ = _FACE.names
__getattr__ = _FACE.get
__dir__ = _FACE.dir
