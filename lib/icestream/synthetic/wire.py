"""The wire format: records to send, the event timestamp format, encoding and payload files."""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple


class Record(NamedTuple):
    """One Kinesis record to send (immutable; a named tuple because the generator makes very many).

    Attributes:
        data: The payload bytes.
        partition_key: The Kinesis partition key (the user id, else a random key).
        kind: ``event``, ``duplicate``, a malformed kind, ``kinesis_oversized`` or ``file``.
        event_ts: Event time (epoch seconds) of the event, or of the event a bad record was made from.
        send_at: When to send it (epoch seconds): the event time, later for a late event.
        event_type: The event type, if any.
        event_id: The event id, if any.
        late: True for an event sent after newer ones.
        extra_fields: True when the event carries an unknown extra top-level field.
    """

    data: bytes
    partition_key: str
    kind: str
    event_ts: float
    send_at: float
    event_type: str | None = None
    event_id: str | None = None
    late: bool = False
    extra_fields: bool = False

    @property
    def size(self) -> int:
        """Bytes Kinesis counts against its limits: data plus partition key."""
        return len(self.data) + len(self.partition_key.encode())


@functools.lru_cache(maxsize=4096)
def _whole_second(whole: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


def format_ts(epoch_seconds: float) -> str:
    """Format epoch seconds as ISO-8601 UTC with milliseconds and ``Z`` (the wire format)."""
    whole = math.floor(epoch_seconds)
    millis = min(999, round((epoch_seconds - whole) * 1000))
    return f"{_whole_second(whole)}.{millis:03d}Z"


def parse_ts(text: str) -> datetime:
    """Parse an ISO-8601 timestamp with ``Z`` or an offset into an aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


# One encoder for every payload: json.dumps with options builds a new encoder on every call, and
# JSONEncoder.encode a new C encoder; the C encoder itself can be reused (no cycle check: events are trees).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
# c_make_encoder is CPython's private C accelerator (None without it); typeshed does not declare it.
_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODER = (
    _MAKE_ENCODER(None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    if _MAKE_ENCODER is not None
    else None
)


def encode_event(event: dict[str, Any]) -> bytes:
    """Encode one event as its wire payload (compact UTF-8 JSON)."""
    if _C_ENCODER is None:
        return _ENCODER.encode(event).encode()
    return "".join(_C_ENCODER(event, 0)).encode()


def uuid4_text(bits: int) -> str:
    """``str(uuid.UUID(int=bits, version=4))``, without building the object (the generator makes many)."""
    value = bits & ~(0xC000 << 48) | 0x8000 << 48  # the RFC 4122 variant
    text = f"{value & ~(0xF000 << 64) | 4 << 76:032x}"  # version 4
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def decode_events(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Decode the clean events among ``records`` (kind ``event``) into dicts."""
    return [json.loads(record.data) for record in records if record.kind == "event"]


def sample_event() -> dict[str, Any]:
    """A fixed, valid example event (used to build malformed payloads without a generator)."""
    return {
        "event_id": "6f1c2a9e-4b7d-4c1e-9a53-2d8f0b7e1c44",
        "user_id": "u-00042",
        "session_id": "s-0001a2b3c4d5",
        "event_type": "page_view",
        "event_ts": "2026-11-21T05:00:00.123Z",
        "properties": {"page": "/home", "referrer": "direct", "duration_ms": "5400"},
        "device_info": {"device_type": "mobile", "os": "iOS", "app_version": "5.3.1"},
    }


def read_records(path: Path) -> Iterator[Record]:
    """Read a JSON-lines file of payloads (one per line, sent as they are) as records.

    The partition key is the payload's ``user_id`` when it has one, else a key derived from the line.

    Args:
        path: The file, e.g. ``data/samples/events.jsonl``.

    Yields:
        One record of kind ``file`` per non-empty line.
    """
    with Path(path).open("rb") as lines:
        for number, line in enumerate(lines):
            data = line.rstrip(b"\r\n")
            if not data:
                continue
            try:
                parsed = json.loads(data)
                key = parsed.get("user_id") if isinstance(parsed, dict) else None
            except ValueError:
                key = None
            key = key if isinstance(key, str) and key else f"line-{number}"
            yield Record(data, key, "file", time.time(), 0.0)
