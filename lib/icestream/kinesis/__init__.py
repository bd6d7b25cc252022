"""Kinesis: clients and shard listings, KPL aggregation, payload compression, and the local emulator.

What notebooks and scripts use is offered here (``__all__``), each name looked up on first use.
"""

from __future__ import annotations

from icestream.face import Face

_FACE = Face(
    __name__,
    {
        "ensure_stream": "icestream.kinesis.clients",
        "hash_key": "icestream.kinesis.clients",
        "kinesis_client": "icestream.kinesis.clients",
        "kinesis_connection": "icestream.kinesis.clients",
        "list_shards": "icestream.kinesis.clients",
        "most_bytes_admitted": "icestream.kinesis.write_limits",
        "peek_records": "icestream.kinesis.clients",
        "retention_hours": "icestream.kinesis.clients",
        "shard_for_key": "icestream.kinesis.clients",
        "shard_table": "icestream.kinesis.clients",
    },
)
__all__ = _FACE.names
__getattr__ = _FACE.get
__dir__ = _FACE.dir
