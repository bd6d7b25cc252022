"""Malformed records of every kind the ingest must reject, built from a valid event.

How notebook 01 shows one, with the ingest's verdict, is :mod:`icestream.demos.malformed_showcase`.
"""

from __future__ import annotations

from typing import Any

from icestream.errors import ConfigError
from icestream.lake.schema import REQUIRED_FIELDS
from icestream.limits import DEFAULT_MAX_EVENT_BYTES, MAX_RECORD_BYTES
from icestream.synthetic.wire import encode_event, sample_event

MALFORMED_KINDS = (
    "invalid_json",
    "truncated_json",
    "bad_timestamp",
    "wrong_type_string",
    "wrong_type_number",
    "missing_event_id",
    "missing_event_type",
    "missing_event_ts",
    "missing_user_id",
    "empty_payload",
    "non_utf8",
    "oversized",
    "json_array",
    "bad_number",
)
# What each malformed kind is, and why the ingest must reject it (also in data/samples/README.md).
MALFORMED_DESCRIPTIONS = {
    "invalid_json": "not JSON: single quotes and a trailing comma",
    "truncated_json": "a valid event cut off halfway through",
    "bad_timestamp": "event_ts is a string but no real time (month 13, hour 25)",
    "wrong_type_string": "a number where a string is due (user_id: 48213)",
    "wrong_type_number": (
        'the time as a number inside an object where ISO-8601 text is due (event_ts: {"epoch_ms": ...})'
    ),
    "missing_event_id": "required field event_id left out",
    "missing_event_type": "required field event_type left out",
    "missing_event_ts": "required field event_ts left out",
    "missing_user_id": "required field user_id left out",
    "empty_payload": "zero bytes",
    "non_utf8": "a Latin-1 byte (0xE9) inside a string value: not UTF-8",
    "oversized": "a valid event padded to max_event_bytes + 1 KiB (above the ingest limit, below Kinesis's 1 MiB)",
    "json_array": "a JSON array holding an event, instead of an object",
    "bad_number": "a number JSON has not (score: NaN, as Python's json.dumps writes float('nan'))",
}
# A record above Kinesis's 1 MiB limit: the producer reports it and never sends it.
KINESIS_OVERSIZED = "kinesis_oversized"


def malformed_payload(
    kind: str,
    event: dict[str, Any] | None = None,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
) -> bytes:
    """Build one malformed payload of ``kind`` from a valid event (deterministic).

    Args:
        kind: One of :data:`MALFORMED_KINDS`, or ``kinesis_oversized`` (above 1 MiB: never sendable).
        event: The valid event to spoil (default :func:`~icestream.synthetic.wire.sample_event`).
        max_event_bytes: The ingest's size limit; ``oversized`` payloads exceed it by about 1 KiB.

    Returns:
        The payload bytes.

    Raises:
        ConfigError: If ``kind`` is unknown.
    """
    event = dict(event or sample_event())
    if kind == "invalid_json":
        # Single quotes and a trailing comma: looks like JSON, is not.
        return f"{{'event_id': '{event['event_id']}', 'event_type': '{event['event_type']}',}}".encode()
    if kind == "truncated_json":
        whole = encode_event(event)
        return whole[: len(whole) // 2]
    if kind == "bad_timestamp":
        return encode_event({**event, "event_ts": "2026-13-45T25:61:00Z"})
    if kind == "wrong_type_string":
        # A number where a string is due.
        return encode_event({**event, "user_id": 48213})
    if kind == "wrong_type_number":
        # An object where a timestamp string is due: the time as an epoch-millisecond object, not ISO-8601 text.
        return encode_event({**event, "event_ts": {"epoch_ms": 1795237200123}})
    if kind.startswith("missing_") and kind[len("missing_") :] in REQUIRED_FIELDS:
        event.pop(kind[len("missing_") :])
        return encode_event(event)
    if kind == "empty_payload":
        return b""
    if kind == "non_utf8":
        # Latin-1 bytes in a string value: valid JSON structure, invalid UTF-8.
        whole = encode_event({**event, "properties": {**event.get("properties", {}), "page": "/caf\u00e9"}})
        return whole.replace("/caf\u00e9".encode(), "/caf\u00e9".encode("latin-1"))
    if kind in ("oversized", KINESIS_OVERSIZED):
        target = max_event_bytes + 1024 if kind == "oversized" else MAX_RECORD_BYTES + 1024
        base = len(encode_event({**event, "properties": {**event.get("properties", {}), "blob": ""}}))
        return encode_event({**event, "properties": {**event.get("properties", {}), "blob": "x" * (target - base)}})
    if kind == "json_array":
        # A top-level array is this sample's whole point; encode_event is typed for the objects it normally gets.
        return encode_event([event])  # type: ignore[arg-type]
    if kind == "bad_number":
        # What json.dumps writes for float('nan') by default: Python reads it back, JSON has no such number.
        return encode_event(event)[:-1] + b',"score":NaN}'
    raise ConfigError(f"malformed kind {kind!r}: choose one of {', '.join(MALFORMED_KINDS)}.")
