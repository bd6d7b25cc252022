"""The ingest's acceptance rules, restated independently of icestream.ingest.parse for the generator's tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from icestream.lake.schema import REQUIRED_FIELDS
from icestream.synthetic.wire import parse_ts

END = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)  # the end of the generated windows in these tests
_SCHEMA_FIELDS = ("event_id", "user_id", "session_id", "event_type", "event_ts", "properties", "device_info")


class _NotANumberError(Exception):
    """NaN, Infinity or -Infinity: Python's json reads them, JSON has no such numbers."""


def _not_a_json_number(literal: str) -> None:
    raise _NotANumberError(literal)


def reject_reason(payload: bytes, max_event_bytes: int = 64 * 1024) -> str | None:
    """The ingest's rules, as the issue states them: None for a valid record, else why not."""
    if len(payload) > max_event_bytes:
        return "oversized"
    try:
        event = json.loads(payload.decode("utf-8"), parse_constant=_not_a_json_number)
    except UnicodeDecodeError:
        return "non_utf8"
    except _NotANumberError:
        return "bad_number"
    except ValueError:
        return "invalid_json"
    if not isinstance(event, dict):
        return "not_object"
    for name in REQUIRED_FIELDS:
        if name not in event:
            return f"missing_{name}"
    for name in ("event_id", "user_id", "session_id", "event_type", "event_ts"):
        if name in event and not isinstance(event[name], str):
            return "wrong_type"
    try:
        parse_ts(event["event_ts"])
    except ValueError:
        return "bad_timestamp"
    if not isinstance(event.get("properties", {}), dict) or not isinstance(event.get("device_info", {}), dict):
        return "wrong_type"
    properties = event.get("properties") or {}
    if any(properties.get(name) is not None for name in event if name not in _SCHEMA_FIELDS):
        return "conflicting_field"  # an unknown top-level field that properties holds too
    return None
