"""The wire format's fast paths give exactly what the standard library gives."""

from __future__ import annotations

import json
import random
import uuid

from hypothesis import given
from hypothesis import strategies as st

from icestream.synthetic.wire import Record, encode_event, format_ts, uuid4_text

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(event=st.dictionaries(st.text(), values, max_size=8))
def test_encoding_is_compact_utf8_json(event: dict) -> None:
    expected = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
    assert encode_event(event) == expected
    assert json.loads(encode_event(event)) == event


def test_uuid_text_is_the_standard_version_4_uuid() -> None:
    rng = random.Random(3)
    for _ in range(2000):
        bits = rng.getrandbits(128)
        assert uuid4_text(bits) == str(uuid.UUID(int=bits, version=4))


def test_timestamps_have_milliseconds_and_z() -> None:
    assert format_ts(1795237200.123) == "2026-11-21T05:00:00.123Z"
    assert format_ts(1795237200.9996) == "2026-11-21T05:00:00.999Z"  # never rounds into the next second


def test_record_size_counts_data_and_key_bytes() -> None:
    assert Record(b"abc", "ü", "event", 0.0, 0.0).size == 3 + 2
