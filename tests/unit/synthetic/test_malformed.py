"""Malformed payloads: each kind is rejected for its own reason and has the defect it names."""

from __future__ import annotations

import json

import pytest

from icestream.errors import ConfigError
from icestream.limits import MAX_RECORD_BYTES
from icestream.synthetic.malformed import MALFORMED_KINDS, malformed_payload
from icestream.synthetic.wire import sample_event
from tests.unit.synthetic.ingest_rules import reject_reason


@pytest.mark.parametrize("kind", MALFORMED_KINDS)
def test_every_malformed_kind_is_rejected_for_its_own_reason(kind: str) -> None:
    payload = malformed_payload(kind)
    expected = {
        "wrong_type_string": "wrong_type",
        "wrong_type_number": "wrong_type",
        "truncated_json": "invalid_json",
        "empty_payload": "invalid_json",
        "json_array": "not_object",
    }.get(kind, kind)
    assert reject_reason(payload) == expected
    assert len(payload) < MAX_RECORD_BYTES


def test_malformed_payloads_have_the_named_defect() -> None:
    assert malformed_payload("empty_payload") == b""
    assert json.loads(malformed_payload("wrong_type_string"))["user_id"] == 48213
    assert isinstance(json.loads(malformed_payload("wrong_type_number"))["event_ts"], dict)
    assert isinstance(json.loads(malformed_payload("json_array")), list)
    assert 64 * 1024 < len(malformed_payload("oversized")) < 66 * 1024
    assert len(malformed_payload("oversized", max_event_bytes=4096)) == 5120
    assert len(malformed_payload("kinesis_oversized")) > MAX_RECORD_BYTES
    assert reject_reason(json.dumps(sample_event()).encode()) is None
    with pytest.raises(ConfigError, match="choose one of"):
        malformed_payload("nonsense")
