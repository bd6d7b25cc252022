"""The fast path (msgspec, ``parse_event``) says exactly what the reference path (``parse_payload``) says."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icestream.ingest.parse import ParsedEvent, Rejection, parse_event, parse_payload
from icestream.limits import DEFAULT_MAX_EVENT_BYTES
from icestream.synthetic.generator import backfill_config, generate
from tests.helpers.samples import event, malformed_samples, sample_events


def reference(payload: bytes, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, evolve: bool = False) -> object:
    parsed = parse_payload(payload, max_event_bytes, evolve)
    return parsed if isinstance(parsed, Rejection) else parsed.fields()


def assert_same(payload: bytes, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, evolve: bool = False) -> object:
    fast, slow = parse_event(payload, max_event_bytes, evolve), reference(payload, max_event_bytes, evolve)
    assert fast == slow, payload[:200]
    if isinstance(fast, tuple):
        assert isinstance(slow, tuple)
        assert list(fast[5].items()) == list(slow[5].items()), "properties keep the reference path's order"
        assert fast[4].tzinfo == slow[4].tzinfo
    return fast


def test_samples_and_malformed_corpus_agree() -> None:
    payloads = sample_events() + [payload for _, payload in malformed_samples()]
    results = [assert_same(payload) for payload in payloads]
    assert sum(isinstance(result, tuple) for result in results) >= 300
    assert sum(isinstance(result, Rejection) for result in results) == len(malformed_samples())


def test_generated_records_agree() -> None:
    records, _ = generate(backfill_config(hours=1, count=5_000, seed=3))
    results = [assert_same(record.data) for record in records]
    assert any(isinstance(result, Rejection) for result in results)
    assert sum(isinstance(result, tuple) for result in results) > 4_000


@pytest.mark.parametrize(
    "payload",
    [
        b'\xef\xbb\xbf{"event_id":"e","user_id":"u","event_type":"t","event_ts":"2026-11-21T05:00:00Z"}',  # BOM
        event(event_id="\ud800"),  # a lone surrogate, spelt \ud800: msgspec refuses, json accepts
        event(extra="\udc00x"),
        event(extra=12345678901234567890123456789),  # an unknown field: the reference path folds it
        event(extra=float("inf")),  # json writes Infinity, msgspec refuses it
        event(extra=1.5, more=[1, {"a": None}], last=True),
        event(device_info={"os": "iOS", "nested": [[[[[[[]]]]]]]}),
        event(device_info={"os": "iOS", "build": 7}),
        event(properties={"page": "/x", "n": None}, page="/top", n="kept"),  # page: both places, a reject
        event(properties={"n": None}, n="kept"),  # a null property is absent: the top-level value fills it
        event(properties=None, device_info=None, session_id=None),
        event(properties={}, device_info={}),
        event(event_id="e", **{"event_id ": "near"}),
        b'{"event_id":"a","event_id":"b","user_id":"u","event_type":"t","event_ts":"2026-11-21T05:00:00Z"}',
        b'{"event_id":"e\x01","user_id":"u","event_type":"t","event_ts":"2026-11-21T05:00:00Z"}',
        b'{"event_id":"e","user_id":"u","event_type":"t","event_ts":"2026-11-21T05:00:00Z"}\x0c',
        b'{"event_id":"e","user_id":"\xed\xa0\x80","event_type":"t","event_ts":"2026-11-21T05:00:00Z"}',
        # Invalid UTF-8 in a key the reference path ignores: msgspec would skip it unchecked.
        b'{"event_id":"e","user_id":"u","event_type":"t","event_ts":"2026-11-21T05:00:00Z","device_info":{"x":"\xed\xa0\x80"}}',
        b'{"event_id":"e","user_id":"u","event_type":"t","event_ts":"2026-11-21T05:00:00Z","properties":{"k":"\xff"}}',
        event(event_ts="2026-11-21T05:00:00"),
        event(event_ts="0001-01-01T00:00:00+01:00"),
        event(event_ts="2026-11-30T12:00:00.123456789Z"),  # cut to microseconds, and both say so
        event(event_ts="2026-11-30T12:00:00.123456789Z", extra="x"),
        event(event_ts="2026-11-30T12:00:00.1234560Z"),
        event(user_id=""),
        event(session_id=""),
        b"[" * 2000 + b"]" * 2000,
        b"",
    ],
)
def test_edge_payloads_agree(payload: bytes) -> None:
    assert_same(payload)
    assert_same(payload, evolve=True)


def test_oversized_agrees_at_the_limit() -> None:
    payload = event()
    assert isinstance(assert_same(payload, len(payload)), tuple)
    assert assert_same(payload, len(payload) - 1).reason == "oversized"  # type: ignore[union-attr]


def test_parse_payload_still_returns_parsed_events() -> None:
    assert isinstance(parse_payload(event()), ParsedEvent)


text = st.text(max_size=12) | st.sampled_from(["\ud800", "\udfff", "2026-11-21T05:00:00Z", "", "\x00", "é"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=10,
)
fields = st.sampled_from(
    ["event_id", "user_id", "session_id", "event_type", "event_ts", "properties", "device_info", "x", "page"]
)


@given(st.dictionaries(fields, json_values | st.dictionaries(text, text | st.none(), max_size=3)))
def test_any_json_object_agrees(document: dict[str, object]) -> None:
    assert_same(json.dumps(document).encode())
    assert_same(json.dumps(document).encode(), evolve=True)


flat = st.dictionaries(text, text | st.none(), max_size=3)
valid_looking = st.fixed_dictionaries(
    {
        "event_id": text,
        "user_id": text,
        "event_type": text,
        "event_ts": st.sampled_from(["2026-11-21T05:00:00.5+01:00", "2026-11-21T05:00:00.500000001+01:00"]),
    },
    optional={"session_id": text | st.none(), "properties": flat, "device_info": flat, "extra": text},
)


@given(valid_looking)
def test_valid_looking_events_agree(document: dict[str, object]) -> None:
    assert_same(json.dumps(document).encode())
    assert_same(json.dumps(document).encode(), evolve=True)
    assert_same(json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogatepass"))


@given(st.binary(max_size=300))
def test_any_bytes_agree(payload: bytes) -> None:
    assert_same(payload)


@given(st.integers(min_value=0, max_value=400), st.binary(min_size=1, max_size=3))
def test_corrupted_events_agree(position: int, garbage: bytes) -> None:
    payload = event(extra="x" * 40)
    cut = position % len(payload)
    assert_same(payload[:cut] + garbage + payload[cut:])
