"""Sending records to Kinesis.

- :mod:`~icestream.producer.put`: the PutRecords loop (batches within the limits, per-record retries,
  pacing, a sender thread).
- :mod:`~icestream.producer.summary`: what a run of the producer did, every record accounted for.
- :mod:`~icestream.producer.plan`: what an ``icestream produce`` run sends, at what rate and why.
- :mod:`~icestream.producer.run`: one production run and its typed summary in the run folder.
- :mod:`~icestream.producer.background`: live production in its own process (start, status, stop).
- :mod:`~icestream.producer.hot_shard`: a shard's write limit shown on a stream of its own.
- :mod:`~icestream.producer.routed_demo`: two record kinds and a new field, routed and evolved (notebook 05).
- :mod:`~icestream.producer.crash_demo`: the ingest as its own process, SIGKILLed inside a batch and
  restarted: nothing lost, nothing twice (notebook 02).
- :mod:`~icestream.producer.change_demo`, :mod:`~icestream.producer.metrics_demo`: change data kept as a
  keyed table (notebook 06), and real_time_metrics kept by the ingest (notebook 07).
"""

from icestream.producer.background import (
    background_producer_status,
    ingest_seconds,
    keep_producing,
    start_background_producer,
    start_live_window,
    stop_background_producer,
)
from icestream.producer.change_demo import ChangeDemo, change_stream_demo
from icestream.producer.crash_demo import CrashDemo, crash_demo, crash_demo_settings, processes_in_group, wait_for_pause
from icestream.producer.hot_shard import hot_shard_demo
from icestream.producer.metrics_demo import MetricsDemo, metrics_stream_demo
from icestream.producer.routed_demo import RoutedDemo, routed_stream_demo
from icestream.producer.run import RunSummary, read_run_summary, run_production, run_summary_path

__all__ = [
    "ChangeDemo",
    "CrashDemo",
    "MetricsDemo",
    "RoutedDemo",
    "RunSummary",
    "background_producer_status",
    "change_stream_demo",
    "crash_demo",
    "crash_demo_settings",
    "hot_shard_demo",
    "ingest_seconds",
    "keep_producing",
    "metrics_stream_demo",
    "processes_in_group",
    "read_run_summary",
    "routed_stream_demo",
    "run_production",
    "run_summary_path",
    "start_background_producer",
    "start_live_window",
    "stop_background_producer",
    "wait_for_pause",
]
