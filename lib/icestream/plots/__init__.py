"""Charts for the notebooks: one module per notebook topic, matplotlib only, axes labelled with units."""

from icestream.plots.anomaly import rates_with_flags
from icestream.plots.health import before_after, file_size_histogram, files_per_partition
from icestream.plots.layout import layout_diagram
from icestream.plots.live import live_dashboard, live_figure
from icestream.plots.realtime import device_split, events_per_minute
from icestream.plots.report import plot_freshness, plot_lag, plot_phases, plot_rates
from icestream.plots.rowlevel import metrics_growth, modes_compared
from icestream.plots.streaming import watermark_progress
from icestream.plots.time_travel import counts_compared

__all__ = [
    "before_after",
    "counts_compared",
    "device_split",
    "events_per_minute",
    "file_size_histogram",
    "files_per_partition",
    "layout_diagram",
    "live_dashboard",
    "live_figure",
    "metrics_growth",
    "modes_compared",
    "plot_freshness",
    "plot_lag",
    "plot_phases",
    "plot_rates",
    "rates_with_flags",
    "watermark_progress",
]
