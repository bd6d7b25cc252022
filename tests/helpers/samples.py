"""What the parser must say about the committed samples (``data/samples/malformed.jsonl``)."""

from __future__ import annotations

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
}
