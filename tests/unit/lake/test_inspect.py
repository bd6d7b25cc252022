"""Readable partition labels and file names from metadata rows."""

from __future__ import annotations

from icestream.lake.inspect import name_of, partition_label


def test_partition_labels() -> None:
    assert partition_label({"event_ts_hour": 498677}) == "2026-11-21 05:00"
    assert partition_label({"ingest_ts_day": "2026-11-21"}) == "2026-11-21"
    assert partition_label({"shard": "a"}) == "shard=a"
    assert partition_label({}) == partition_label(None) == "unpartitioned"


def test_name_of_a_location() -> None:
    assert name_of("file:/w/ns/t/metadata/v3.metadata.json") == "v3.metadata.json"
