"""The streaming ingest: Kinesis → Spark → Iceberg, exactly once (see ``query`` for the design)."""

from icestream.ingest.changes import ChangeSpec
from icestream.ingest.options import IngestOptions, ingest_options, parse_trigger
from icestream.ingest.pause import PAUSE_MARK, parse_pause, pause_hook
from icestream.ingest.positions import load_committed
from icestream.ingest.query import IngestQuery, start_ingest

__all__ = [
    "PAUSE_MARK",
    "ChangeSpec",
    "IngestOptions",
    "IngestQuery",
    "ingest_options",
    "load_committed",
    "parse_pause",
    "parse_trigger",
    "pause_hook",
    "start_ingest",
]
