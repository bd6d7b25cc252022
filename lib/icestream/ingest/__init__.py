"""The streaming ingest: Kinesis → Spark → Iceberg, exactly once (see ``query`` for the design)."""

from icestream.ingest.query import IngestError, IngestOptions, IngestQuery, ingest_options, parse_trigger, start_ingest

__all__ = ["IngestError", "IngestOptions", "IngestQuery", "ingest_options", "parse_trigger", "start_ingest"]
