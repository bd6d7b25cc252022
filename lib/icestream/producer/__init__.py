"""Sending records to Kinesis.

- :mod:`~icestream.producer.put`: the PutRecords loop (batches within the limits, per-record retries,
  pacing, a sender thread).
- :mod:`~icestream.producer.summary`: what a run of the producer did, every record accounted for.
- :mod:`~icestream.producer.plan`: what an ``icestream produce`` run sends, at what rate and why.
- :mod:`~icestream.producer.run`: one production run and its typed summary in the run folder.
- :mod:`~icestream.producer.background`: live production in its own process (start, status, stop).

The scenarios that send to a stream of their own and check an ingest against it (the hot shard, the
crash, the routed, change and metrics streams) are :mod:`icestream.demos`.
"""

from icestream.producer.background import (
    background_producer_status,
    ingest_seconds,
    keep_producing,
    start_background_producer,
    start_live_window,
    stop_background_producer,
)
from icestream.producer.run import RunSummary, read_run_summary, run_production, run_summary_path

__all__ = [
    "RunSummary",
    "background_producer_status",
    "ingest_seconds",
    "keep_producing",
    "read_run_summary",
    "run_production",
    "run_summary_path",
    "start_background_producer",
    "start_live_window",
    "stop_background_producer",
]
