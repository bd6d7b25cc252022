"""Kinesis: clients and shard listings, KPL aggregation, payload compression, and the local emulator.

What notebooks and scripts use is importable from here (``__all__``).
"""

from icestream.stream.clients import (
    ensure_stream,
    hash_key,
    kinesis_client,
    list_shards,
    peek_records,
    retention_hours,
    shard_for_key,
    shard_table,
)
from icestream.stream.write_limits import most_bytes_admitted

__all__ = [
    "ensure_stream",
    "hash_key",
    "kinesis_client",
    "list_shards",
    "most_bytes_admitted",
    "peek_records",
    "retention_hours",
    "shard_for_key",
    "shard_table",
]
