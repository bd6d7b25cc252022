"""Parsing: every sample event is accepted, every malformed kind is rejected with its reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icestream.ingest.parse import (
    REJECT_REASONS,
    ParsedEvent,
    Rejection,
    cut_to_microseconds,
    parse_event,
    parse_payload,
)
from tests.helpers.samples import EXPECTED_REASON, event, malformed_samples, sample_events


def test_every_sample_event_is_accepted() -> None:
    payloads = sample_events()
    assert len(payloads) >= 300
    for payload in payloads:
        parsed = parse_payload(payload)
        assert isinstance(parsed, ParsedEvent), (parsed, payload[:100])
        assert parsed.event_ts.tzinfo is UTC
        assert all(isinstance(value, str) for value in parsed.properties.values())


def test_samples_cover_every_malformed_kind() -> None:
    from icestream.synthetic.malformed import MALFORMED_KINDS

    assert {kind for kind, _ in malformed_samples()} == set(MALFORMED_KINDS) == set(EXPECTED_REASON)


@pytest.mark.parametrize(
    ("kind", "payload"), malformed_samples(), ids=lambda value: value if isinstance(value, str) else ""
)
def test_malformed_sample_is_rejected_with_its_reason(kind: str, payload: bytes) -> None:
    parsed = parse_payload(payload)
    assert isinstance(parsed, Rejection)
    assert parsed.reason == EXPECTED_REASON[kind]
    assert parsed.detail


def test_timestamps_with_offsets_become_utc() -> None:
    parsed = parse_payload(event(event_ts="2026-11-21T07:00:00+02:00"))
    assert isinstance(parsed, ParsedEvent)
    assert parsed.event_ts == datetime(2026, 11, 21, 5, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("stamp", "microsecond", "cut"),
    [
        ("2026-11-30T12:00:00.123456789Z", 123456, True),
        ("2026-11-30T12:00:00,123456789Z", 123456, True),  # ISO's decimal comma
        ("2026-11-30T14:00:00.9999999+02:00", 999999, True),  # cut, never rounded up
        ("20261130T120000.123456789Z", 123456, True),  # the basic format: shorter than the extended one
        ("2026-11-30T12:00:00.123456000Z", 123456, False),  # the digits past the sixth are zero: nothing is lost
        ("2026-11-30T12:00:00.123456Z", 123456, False),
        ("2026-11-30T12:00:00.123456+00:00", 123456, False),
        ("2026-11-30T12:00:00.123Z", 123000, False),
        ("2026-11-30T12:00:00Z", 0, False),
    ],
)
def test_a_time_below_a_microsecond_is_cut_and_says_so(stamp: str, microsecond: int, cut: bool) -> None:
    parsed = parse_payload(event(event_ts=stamp))
    assert isinstance(parsed, ParsedEvent)
    assert parsed.event_ts == datetime(2026, 11, 30, 12, 0, 0, microsecond, tzinfo=UTC)
    assert parsed.time_cut is cut
    fields = parse_event(event(event_ts=stamp))
    assert isinstance(fields, tuple)
    assert (fields[4], fields[8]) == (parsed.event_ts, cut)


@given(
    st.sampled_from(["2026-11-30", "20261130"]),
    st.sampled_from(["12", "12:00", "1200", "12:00:00", "120000"]),
    st.sampled_from([".", ","]),
    st.text("0123456789", min_size=1, max_size=12),
    st.sampled_from(["Z", "+02:00", "-0130", "+00"]),
)
def test_a_cut_is_seen_in_every_form_of_a_time(date: str, time: str, mark: str, fraction: str, offset: str) -> None:
    """The check skips the search for short times of the common shape: never a time it cuts."""
    stamp = f"{date}T{time}{mark}{fraction}{offset}"
    try:
        datetime.fromisoformat(stamp)
    except ValueError:
        return  # a form Python does not read is rejected, never cut
    assert cut_to_microseconds(stamp) is (fraction[6:].strip("0") != ""), stamp


@pytest.mark.parametrize("stamp", ["2026-11-21T05:00:00", "yesterday", "2026-02-30T00:00:00Z", ""])
def test_timestamps_without_offset_or_invalid_are_rejected(stamp: str) -> None:
    parsed = parse_payload(event(event_ts=stamp))
    assert isinstance(parsed, Rejection)
    assert parsed.reason in ("bad_timestamp", "missing_event_ts")


def test_unknown_fields_are_kept_in_properties() -> None:
    parsed = parse_payload(event(locale="de-DE", experiment={"arm": "b"}))
    assert isinstance(parsed, ParsedEvent)
    assert parsed.properties == {"page": "/home", "locale": "de-DE", "experiment": '{"arm":"b"}'}


@pytest.mark.parametrize("value", ["/top", {"path": "/top"}, 7, None])
def test_a_field_given_at_top_level_and_in_properties_is_rejected(value: object) -> None:
    """Folding the top-level value in would overwrite the property, or be dropped: either loses a value silently."""
    payload = event(page=value, properties={"page": "/inner"})
    for parsed in (parse_payload(payload), parse_event(payload)):
        assert isinstance(parsed, Rejection), parsed
        assert (parsed.reason, parsed.detail) == (
            "conflicting_field",
            "field 'page' given both at top level and in properties",
        )
    assert "conflicting_field" in REJECT_REASONS


def test_a_null_property_is_absent_so_the_top_level_field_fills_it() -> None:
    parsed = parse_payload(event(page="/top", properties={"page": None, "referrer": "direct"}))
    assert isinstance(parsed, ParsedEvent)
    assert parsed.properties == {"referrer": "direct", "page": "/top"}


def test_with_evolve_a_field_that_becomes_a_column_is_no_conflict_one_folded_is() -> None:
    parsed = parse_payload(event(page="/top", properties={"page": "/inner"}), evolve=True)
    assert isinstance(parsed, ParsedEvent)
    assert (parsed.extras, parsed.properties) == ({"page": "s:/top"}, {"page": "/inner"})
    folded = parse_payload(event(page={"path": "/top"}, properties={"page": "/inner"}), evolve=True)
    assert isinstance(folded, Rejection)
    assert folded.reason == "conflicting_field"


def test_optional_fields_may_be_absent() -> None:
    parsed = parse_payload(event(session_id=..., properties=..., device_info=...))
    assert isinstance(parsed, ParsedEvent)
    assert (parsed.session_id, parsed.properties, parsed.device_info) == (None, {}, None)


@pytest.mark.parametrize(
    ("changes", "detail"),
    [
        ({"properties": {"amount": 12.5}}, "properties.amount"),
        ({"properties": ["a"]}, "properties"),
        ({"device_info": "mobile"}, "device_info"),
        ({"device_info": {"os": 17}}, "device_info.os"),
        ({"session_id": 5}, "session_id"),
        ({"event_type": ["click"]}, "event_type"),
    ],
)
def test_wrong_types_are_rejected_naming_the_field(changes: dict[str, object], detail: str) -> None:
    parsed = parse_payload(event(**changes))
    assert isinstance(parsed, Rejection)
    assert parsed.reason == "wrong_type"
    assert parsed.detail.startswith(detail)


@pytest.mark.parametrize(
    ("changes", "got"),
    [
        ({"event_ts": {"epoch_ms": 1795237200123}}, "event_ts: expected a string, got an object"),
        ({"properties": ["a"]}, "properties: expected an object, got an array"),
        ({"session_id": 5}, "session_id: expected a string, got a number"),
        ({"device_info": {"os": True}}, "device_info.os: expected a string, got a boolean"),
    ],
)
def test_a_wrong_type_is_named_as_a_reader_would(changes: dict[str, object], got: str) -> None:
    """01 prints these details beside its malformed records: "got a object" read as a typo."""
    parsed = parse_payload(event(**changes))
    assert isinstance(parsed, Rejection)
    assert parsed.detail == got


def test_size_limit_is_configurable() -> None:
    payload = event()
    assert isinstance(parse_payload(payload, max_event_bytes=len(payload)), ParsedEvent)
    assert parse_payload(payload, max_event_bytes=len(payload) - 1).reason == "oversized"  # type: ignore[union-attr]


@given(st.binary(max_size=512))
def test_any_bytes_are_accepted_or_rejected_never_raise(payload: bytes) -> None:
    parsed = parse_payload(payload)
    assert isinstance(parsed, ParsedEvent) or parsed.reason in REJECT_REASONS


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


@given(
    st.dictionaries(
        st.sampled_from(["event_id", "user_id", "event_type", "event_ts", "properties", "device_info", "x"]),
        json_values,
    )
)
def test_any_json_object_is_accepted_or_rejected_never_raises(document: dict[str, object]) -> None:
    parsed = parse_payload(json.dumps(document).encode())
    assert isinstance(parsed, ParsedEvent) or parsed.reason in REJECT_REASONS


def test_deeply_nested_json_is_rejected_not_a_crash() -> None:
    parsed = parse_payload(b"[" * 100_000 + b"]" * 100_000, max_event_bytes=10**6)
    assert isinstance(parsed, Rejection)


@pytest.mark.parametrize(
    ("literal", "detail"),
    [
        (b"NaN", "NaN is not a JSON number"),
        (b"Infinity", "Infinity is not a JSON number"),
        (b"-Infinity", "-Infinity is not a JSON number"),
        (b"1e400", "1e400 is beyond the range of a double"),
        (b"-2.5E+309", "-2.5E+309 is beyond the range of a double"),
        (b"1" + b"0" * 400, "1000000000000000000000000000000000000000... is beyond the range of a double"),
    ],
)
@pytest.mark.parametrize("where", ["top", "properties", "device_info"])
def test_what_is_not_a_json_number_is_rejected_not_stored(literal: bytes, detail: str, where: str) -> None:
    # Python's json reads NaN and Infinity, and 1e400 as inf, which was kept as "Infinity": a value changed.
    placeholder = b'"@@"'
    spot = {
        "top": {"extra": "@@"},
        "properties": {"properties": {"n": "@@"}},
        "device_info": {"device_info": {"x": "@@"}},
    }
    payload = event(**spot[where]).replace(placeholder, literal)
    for parsed in (parse_payload(payload), parse_event(payload), parse_payload(payload, evolve=True)):
        assert isinstance(parsed, Rejection), parsed
        assert (parsed.reason, parsed.detail) == ("bad_number", detail)
    assert "bad_number" in REJECT_REASONS


def test_numbers_within_a_double_are_kept_as_written() -> None:
    parsed = parse_payload(event(largest=1.7976931348623157e308, big=2**64))
    assert isinstance(parsed, ParsedEvent)
    assert parsed.properties == {"page": "/home", "largest": "1.7976931348623157e+308", "big": str(2**64)}
