"""What the parser must say about the committed samples (``data/samples/malformed.jsonl``)."""

from __future__ import annotations

import base64
import json

from icestream.config import project_home

# Each malformed sample's kind -> the reason the ingest gives when it rejects it.
EXPECTED_REASON = {
    "invalid_json": "invalid_json",
    "truncated_json": "invalid_json",
    "bad_timestamp": "bad_timestamp",
    "wrong_type_string": "wrong_type",
    "wrong_type_number": "wrong_type",
    "missing_event_id": "missing_event_id",
    "missing_event_type": "missing_event_type",
    "missing_event_ts": "missing_event_ts",
    "missing_user_id": "missing_user_id",
    "empty_payload": "empty_payload",
    "non_utf8": "non_utf8",
    "oversized": "oversized",
    "json_array": "not_an_object",
    "bad_number": "bad_number",
}

SAMPLES = project_home() / "data" / "samples"


def sample_events() -> list[bytes]:
    """The committed sample events, one payload per line."""
    return [line.rstrip(b"\n") for line in (SAMPLES / "events.jsonl").read_bytes().splitlines() if line.strip()]


def malformed_samples() -> list[tuple[str, bytes]]:
    """The committed malformed samples as (kind, payload) pairs."""
    rows = [json.loads(line) for line in (SAMPLES / "malformed.jsonl").read_text().splitlines() if line.strip()]
    return [(row["kind"], base64.b64decode(row["payload_base64"])) for row in rows]


def event(**changes: object) -> bytes:
    """A valid event's payload with some fields changed (``...`` leaves a field out)."""
    document = {
        "event_id": "e-1", "user_id": "u-1", "session_id": "s-1", "event_type": "click",
        "event_ts": "2026-11-21T05:00:00.123Z", "properties": {"page": "/home"},
        "device_info": {"device_type": "mobile", "os": "iOS", "app_version": "5.2.1"},
    }  # fmt: skip
    document.update(changes)
    return json.dumps({key: value for key, value in document.items() if value is not ...}).encode()
