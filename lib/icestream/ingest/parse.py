"""Parse and validate one Kinesis payload against the explicit event schema.

Parsing happens in the read task, on the executor, against the schema in ``icestream.schema``
written out as checks, in two steps. The fast path (:func:`parse_event`) decodes with ``orjson``
(a Rust parser, about 4× Python's ``json`` here) and accepts only the shape every valid event has:
an object whose values are strings or null, plus ``properties`` and ``device_info`` objects of
strings or null. Anything else -- every rejection, and valid events with a number, a list or a
deeper object in them -- goes through the reference path, Python's ``json`` with the checks below,
which alone decides every rejection's reason and detail. The fast path can only say yes where the
reference path says yes with the same values: on that shape the two parsers agree (``orjson`` is
the stricter: it refuses lone surrogates, NaN, and numbers Python would keep exact, which then
fall back), and ``tests/unit/ingest/test_parse.py`` checks the two paths agree on the corpus and on
fuzzed payloads. Spark's ``from_json`` was the alternative and was
rejected on purpose: it silently turns a number or an object into a string field (``"user_id":
48213`` would become ``"48213"``), so wrong types would pass; and it cannot tell invalid UTF-8 from
valid text. Every record therefore ends as exactly one of: a :class:`ParsedEvent`, or a
:class:`Rejection` with a short reason code and a detail.

Unknown top-level fields are kept, not dropped: they are folded into ``properties`` (strings as
they are, other JSON values as compact JSON text), unless ``properties`` already has that key, in
which case the explicit property wins. Unknown keys inside ``device_info`` are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from icestream.limits import DEFAULT_MAX_EVENT_BYTES
from icestream.schema import DEVICE_FIELDS, REQUIRED_FIELDS

REJECT_REASONS = (
    "empty_payload",
    "oversized",
    "non_utf8",
    "invalid_json",
    "not_an_object",
    *(f"missing_{name}" for name in REQUIRED_FIELDS),
    "wrong_type",
    "bad_timestamp",
)
KNOWN_FIELDS = frozenset(("event_id", "user_id", "session_id", "event_type", "event_ts", "properties", "device_info"))
STRING_FIELDS = ("event_id", "user_id", "session_id", "event_type", "event_ts")

# An accepted event as a tuple, in ParsedEvent's field order (the read task's row needs no object).
DeviceInfo = tuple["str | None", "str | None", "str | None"]
EventFields = tuple[str, str, "str | None", str, datetime, dict[str, str], "DeviceInfo | None"]


@dataclass(frozen=True)
class ParsedEvent:
    """A valid event, typed as the table stores it."""

    event_id: str
    user_id: str
    session_id: str | None
    event_type: str
    event_ts: datetime  # timezone-aware, UTC
    properties: dict[str, str]
    device_info: tuple[str | None, str | None, str | None] | None


@dataclass(frozen=True)
class Rejection:
    """Why a payload was not accepted."""

    reason: str
    detail: str


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def parse_timestamp(text: str) -> datetime | None:
    """Parse an ISO-8601 timestamp that carries a UTC offset or ``Z``; None if it cannot."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        return None


def parse_event(data: bytes, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> EventFields | Rejection:
    """Like :func:`parse_payload`, an accepted event as a plain tuple: the read task's hot path.

    Returns:
        ``(event_id, user_id, session_id, event_type, event_ts, properties, device_info)``, exactly
        the values :func:`parse_payload` would put in its :class:`ParsedEvent`, or its :class:`Rejection`.
    """
    if data and len(data) <= max_event_bytes:
        try:
            document = _fast_loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            if type(document) is dict:
                fields = _simple_event(document)
                if fields is not None:
                    return fields
    parsed = parse_payload(data, max_event_bytes)
    if isinstance(parsed, Rejection):
        return parsed
    return (
        parsed.event_id, parsed.user_id, parsed.session_id, parsed.event_type, parsed.event_ts, parsed.properties,
        parsed.device_info,
    )  # fmt: skip


_fast_loads: Callable[[bytes], Any] = orjson.loads


def _simple_event(document: dict[str, Any]) -> EventFields | None:
    """The event of a document of the simple shape (see the module docstring), or None to decide slowly.

    Returns None for every document the reference path would reject, and for valid ones it would
    have to fold a non-string value into ``properties`` (as JSON text) or that hold anything but
    strings and nulls: only the reference path decides those.
    """
    get = document.get
    event_id, user_id, event_type, event_ts = get("event_id"), get("user_id"), get("event_type"), get("event_ts")
    if not (type(event_id) is str and type(user_id) is str and type(event_type) is str and type(event_ts) is str):
        return None
    if not (event_id and user_id and event_type and event_ts):
        return None
    session_id = get("session_id")
    if session_id is not None and type(session_id) is not str:
        return None
    timestamp = parse_timestamp(event_ts)
    if timestamp is None:
        return None
    merged: dict[str, str] = {}
    properties = get("properties")
    if properties is not None:
        if type(properties) is not dict:
            return None
        for key, value in properties.items():
            if value is not None:
                if type(value) is not str:
                    return None
                merged[key] = value
    if not document.keys() <= KNOWN_FIELDS:  # unknown top-level fields (rare): into properties
        for key, value in document.items():
            if key not in KNOWN_FIELDS and key not in merged:
                if type(value) is not str:
                    return None
                merged[key] = value
    device = get("device_info")
    device_info = None
    if device is not None:
        if type(device) is not dict:
            return None
        for value in device.values():  # unknown keys too: the shape stays flat (see the docstring)
            if value is not None and type(value) is not str:
                return None
        device_info = (device.get("device_type"), device.get("os"), device.get("app_version"))
    return event_id, user_id, session_id, event_type, timestamp, merged, device_info


def parse_payload(data: bytes, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> ParsedEvent | Rejection:
    """Turn one record's bytes into an event, or say why not (the reference path).

    Args:
        data: The Kinesis record's data.
        max_event_bytes: Payloads larger than this are rejected as ``oversized``.

    Returns:
        A :class:`ParsedEvent`, or a :class:`Rejection` whose ``reason`` is one of
        :data:`REJECT_REASONS`.
    """
    if not data:
        return Rejection("empty_payload", "the record has no data")
    if len(data) > max_event_bytes:
        return Rejection("oversized", f"{len(data)} bytes, above the limit of {max_event_bytes}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return Rejection("non_utf8", f"invalid UTF-8 at byte {error.start}")
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        return Rejection("invalid_json", str(error)[:200])
    if not isinstance(document, dict):
        return Rejection("not_an_object", f"a JSON {_type_name(document)}, not an object")
    # JSON may spell a lone UTF-16 surrogate (\\ud800) that no UTF-8 text can hold; stored, it would
    # become U+FFFD and could merge distinct event ids. Only payloads with escapes need the check.
    if "\\u" in text and _has_lone_surrogate(document):
        return Rejection("non_utf8", "a \\u escape encodes a lone surrogate, which is not valid Unicode text")
    return _validate(document)


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(key) or _has_lone_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(item) for item in value)
    return False


def _validate(document: dict[str, Any]) -> ParsedEvent | Rejection:
    for name in REQUIRED_FIELDS:
        if document.get(name) in (None, ""):
            return Rejection(f"missing_{name}", f"{name} is missing or empty")
    for name in STRING_FIELDS:
        value = document.get(name)
        if value is not None and not isinstance(value, str):
            return Rejection("wrong_type", f"{name}: expected a string, got a {_type_name(value)}")
    event_ts = parse_timestamp(document["event_ts"])
    if event_ts is None:
        return Rejection("bad_timestamp", f"event_ts {document['event_ts'][:60]!r} is not ISO-8601 with a UTC offset")

    properties = document.get("properties")
    if properties is None:
        properties = {}
    if not isinstance(properties, dict):
        return Rejection("wrong_type", f"properties: expected an object, got a {_type_name(properties)}")
    for key, value in properties.items():
        if value is not None and not isinstance(value, str):
            return Rejection("wrong_type", f"properties.{key}: expected a string, got a {_type_name(value)}")
    merged = {key: value for key, value in properties.items() if value is not None}
    for key, value in document.items():
        if key not in KNOWN_FIELDS and key not in merged:
            merged[key] = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))

    device = document.get("device_info")
    device_info = None
    if device is not None:
        if not isinstance(device, dict):
            return Rejection("wrong_type", f"device_info: expected an object, got a {_type_name(device)}")
        for name in DEVICE_FIELDS:
            value = device.get(name)
            if value is not None and not isinstance(value, str):
                return Rejection("wrong_type", f"device_info.{name}: expected a string, got a {_type_name(value)}")
        device_info = tuple(device.get(name) for name in DEVICE_FIELDS)

    return ParsedEvent(
        event_id=document["event_id"],
        user_id=document["user_id"],
        session_id=document.get("session_id"),
        event_type=document["event_type"],
        event_ts=event_ts,
        properties=merged,
        device_info=device_info,  # type: ignore[arg-type]
    )
