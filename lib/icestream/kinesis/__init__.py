"""Kinesis: clients and shard listings, KPL aggregation, payload compression, and the local emulator.

What notebooks and scripts use is offered here (``__all__``), each name looked up on first use.
"""

from __future__ import annotations

from icestream.face import Face

_FACE = Face(
    __name__,
    {
        "ensure_stream": "icestream.stream.clients",
        "hash_key": "icestream.stream.clients",
        "kinesis_client": "icestream.stream.clients",
        "list_shards": "icestream.stream.clients",
        "most_bytes_admitted": "icestream.stream.write_limits",
        "peek_records": "icestream.stream.clients",
        "retention_hours": "icestream.stream.clients",
        "shard_for_key": "icestream.stream.clients",
        "shard_table": "icestream.stream.clients",
    },
)
__all__ = _FACE.names
__getattr__ = _FACE.get
__dir__ = _FACE.dir
