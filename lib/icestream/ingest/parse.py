"""Parse and validate one Kinesis payload against the explicit event schema.

Parsing happens in the read task, on the executor, against the schema in ``icestream.lake.schema``
written out as checks, in two steps. The fast path (:func:`parse_event`) decodes with ``msgspec``
straight into a typed struct of the shape every valid event has (strings or null, ``properties`` an
object of strings or null, ``device_info`` an object of its three keys, strings or null): one C
pass decodes and checks types, about half the time of ``orjson`` plus the same checks in Python
(2.7 → 1.4 µs per generated event). Anything else -- every rejection, an unknown top-level field
(folded into ``properties`` by the reference path), a number, a list or a deeper object -- goes
through the reference path, Python's ``json`` with the checks below, which alone decides every
rejection's reason and detail (what Python's ``json`` reads but JSON has not -- ``NaN``, ``Infinity``,
a number beyond a double -- is ``bad_number``). The fast path can only say yes where the reference path says yes
with the same values: on that shape the two parsers agree (``msgspec`` is the stricter: it refuses
lone surrogates, a BOM and control characters, which then fall back; duplicate keys keep the last
value in both), and ``tests/unit/ingest/test_parse_fast.py`` checks the two paths agree on the
corpus and on fuzzed payloads. Spark's ``from_json`` was the alternative and was
rejected on purpose: it silently turns a number or an object into a string field (``"user_id":
48213`` would become ``"48213"``), so wrong types would pass; and it cannot tell invalid UTF-8 from
valid text. Every record therefore ends as exactly one of: a :class:`ParsedEvent`, or a
:class:`Rejection` with a short reason code and a detail.

Unknown top-level fields are kept, not dropped: they are folded into ``properties`` (strings as
they are, other JSON values as compact JSON text). A field that ``properties`` also holds (with a
value: a null property is an absent one) is rejected as ``conflicting_field`` ("field 'page' given
both at top level and in properties"), whatever the two values: one of them would be lost, and a
reject keeps the payload as sent. Unknown keys inside ``device_info`` are ignored.

``event_ts`` is kept to the microsecond, as Python's ``datetime`` and the table's ``TIMESTAMP`` hold
it: a longer fraction is cut, never rounded (``12:00:00.123456789Z`` is stored as
``12:00:00.123456Z``), and the event is accepted. Each parse says whether it dropped non-zero digits
(``time_cut``, :func:`cut_to_microseconds`), and the read task counts those events
(``event_times_cut`` in the batch's progress and its line).

With schema evolution on (``evolve=True``: :mod:`icestream.ingest.schema_evolution`), an unknown top-level field
whose name is a lower-case identifier and whose value is a string, a number or a boolean is not
folded: it comes back in ``extras``, tagged with its JSON kind, to become (or fill) a column of its
own, and may share its name with a property. A null is an absent field; objects, arrays and other
names are folded as above, and rejected as above when ``properties`` has their key.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import msgspec

from icestream.ingest.schema_evolution import evolvable_field, tag_value
from icestream.lake.schema import DEVICE_FIELDS, REQUIRED_FIELDS
from icestream.limits import DEFAULT_MAX_EVENT_BYTES

REJECT_REASONS = (
    "empty_payload",
    "oversized",
    "non_utf8",
    "invalid_json",
    "bad_number",
    "not_an_object",
    *(f"missing_{name}" for name in REQUIRED_FIELDS),
    "wrong_type",
    "bad_timestamp",
    "conflicting_field",
)
KNOWN_FIELDS = frozenset(("event_id", "user_id", "session_id", "event_type", "event_ts", "properties", "device_info"))
STRING_FIELDS = ("event_id", "user_id", "session_id", "event_type", "event_ts")

# An accepted event as a tuple, in ParsedEvent's field order (the read task's row needs no object).
DeviceInfo = tuple["str | None", "str | None", "str | None"]
EventFields = tuple[
    str, str, "str | None", str, datetime, dict[str, str], "DeviceInfo | None", "dict[str, str] | None", bool
]
# A fraction of a second with a non-zero digit past the sixth: what a microsecond cannot hold.
_PAST_MICROSECONDS = re.compile(r"[.,][0-9]{6}[0-9]*[1-9]")


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
    extras: dict[str, str] | None = None  # with evolve: new top-level fields, tagged (ingest.evolve.tag_value)
    time_cut: bool = False  # event_ts had non-zero digits below a microsecond, dropped (cut_to_microseconds)

    def fields(self) -> EventFields:
        """The event as the tuple :func:`parse_event` returns, in this class's field order."""
        return (
            self.event_id,
            self.user_id,
            self.session_id,
            self.event_type,
            self.event_ts,
            self.properties,
            self.device_info,
            self.extras,
            self.time_cut,
        )


@dataclass(frozen=True)
class Rejection:
    """Why a payload was not accepted."""

    reason: str
    detail: str


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _a(value: Any) -> str:
    """The JSON type of ``value`` as a reject's detail says it: "an object", "a string", "null"."""
    name = _type_name(value)
    return name if name == "null" else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


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


def cut_to_microseconds(text: str) -> bool:
    """Whether :func:`parse_timestamp` of ``text`` dropped digits below a microsecond that were not zero.

    A ``datetime`` holds microseconds; ``fromisoformat`` cuts a longer fraction (never rounds it):
    ``12:00:00.123456789Z`` is read as ``12:00:00.123456Z``.
    """
    # The search costs as much as the parse. The extended form with seconds ("...THH:MM:SS", its colon
    # at 16) has its fraction from character 19: shorter than 27 characters, it has no seventh digit
    # (the generator's "2026-11-21T05:30:02.637Z" has 24), so the read task skips the search.
    if len(text) < 27 and text[16:17] == ":":
        return False
    return _PAST_MICROSECONDS.search(text) is not None


def parse_event(
    data: bytes, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, evolve: bool = False
) -> EventFields | Rejection:
    """Like :func:`parse_payload`, an accepted event as a plain tuple: the read task's hot path.

    Returns:
        ``(event_id, user_id, session_id, event_type, event_ts, properties, device_info, extras,
        time_cut)``, exactly the values :func:`parse_payload` would put in its :class:`ParsedEvent`,
        or its :class:`Rejection`.
    """
    if data and len(data) <= max_event_bytes:
        fields = _simple_event(data)
        if fields is not None:
            return fields
    parsed = parse_payload(data, max_event_bytes, evolve)
    return parsed if isinstance(parsed, Rejection) else parsed.fields()


class _SimpleDevice(msgspec.Struct, forbid_unknown_fields=True):
    """``device_info`` of the simple shape. An unknown key falls back (the reference path ignores it):
    msgspec skips an ignored value without checking its UTF-8, which the reference path rejects."""

    device_type: str | None = None
    os: str | None = None
    app_version: str | None = None


class _SimpleEvent(msgspec.Struct, forbid_unknown_fields=True):
    """The simple shape (see the module docstring); an unknown top-level field falls back."""

    event_id: str
    user_id: str
    event_type: str
    event_ts: str
    session_id: str | None = None
    properties: dict[str, str | None] | None = None
    device_info: _SimpleDevice | None = None


_decode_simple = msgspec.json.Decoder(_SimpleEvent).decode


def _simple_event(data: bytes) -> EventFields | None:
    """The event of a payload of the simple shape, or None to decide slowly.

    Returns None for every payload the reference path would reject, and for valid ones outside the
    shape (an unknown top-level field, any value but a string or null): only the reference path
    decides those.
    """
    try:
        document = _decode_simple(data)
    except (msgspec.MsgspecError, ValueError):  # not JSON, not the shape, or not UTF-8
        return None
    event_id, user_id, event_type, event_ts = (
        document.event_id,
        document.user_id,
        document.event_type,
        document.event_ts,
    )
    if not (event_id and user_id and event_type and event_ts):
        return None
    timestamp = parse_timestamp(event_ts)
    if timestamp is None:
        return None
    given = document.properties
    if given is None:
        properties: dict[str, str] = {}
    elif None in given.values():
        properties = {key: value for key, value in given.items() if value is not None}
    else:
        properties = cast("dict[str, str]", given)  # no null among its values: just checked, without a copy
    device = document.device_info
    device_info = None if device is None else (device.device_type, device.os, device.app_version)
    cut = cut_to_microseconds(event_ts)
    return event_id, user_id, document.session_id, event_type, timestamp, properties, device_info, None, cut


def parse_payload(
    data: bytes, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, evolve: bool = False
) -> ParsedEvent | Rejection:
    """Turn one record's bytes into an event, or say why not (the reference path).

    Args:
        data: The Kinesis record's data.
        max_event_bytes: Payloads larger than this are rejected as ``oversized``.
        evolve: Return new scalar top-level fields in ``extras`` instead of folding them into
            ``properties`` (see the module docstring).

    Returns:
        A :class:`ParsedEvent`, or a :class:`Rejection` whose ``reason`` is one of
        :data:`REJECT_REASONS`.
    """
    document = decode_object(data, max_event_bytes)
    return document if isinstance(document, Rejection) else _validate(document, evolve)


def decode_object(data: bytes, max_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> dict[str, Any] | Rejection:
    """The payload as a JSON object, or why it is none (``empty_payload`` ... ``not_an_object``, ``non_utf8``)."""
    if not data:
        return Rejection("empty_payload", "the record has no data")
    if len(data) > max_bytes:
        return Rejection("oversized", f"{len(data)} bytes, above the limit of {max_bytes}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return Rejection("non_utf8", f"invalid UTF-8 at byte {error.start}")
    try:
        document = json.loads(text, parse_constant=_not_a_number, parse_float=_double, parse_int=_integer)
    except _BadNumberError as error:
        return Rejection("bad_number", str(error))
    except (ValueError, RecursionError) as error:
        return Rejection("invalid_json", str(error)[:200])
    if not isinstance(document, dict):
        return Rejection("not_an_object", f"a JSON {_type_name(document)}, not an object")
    # JSON may spell a lone UTF-16 surrogate (\\ud800) that no UTF-8 text can hold; stored, it would
    # become U+FFFD and could merge distinct event ids. Only payloads with escapes need the check.
    if "\\u" in text and _has_lone_surrogate(document):
        return Rejection("non_utf8", "a \\u escape encodes a lone surrogate, which is not valid Unicode text")
    return document


class _BadNumberError(Exception):
    """A number JSON cannot carry (not a ValueError: the decoder's own errors mean ``invalid_json``)."""


# Python's json reads NaN, Infinity and -Infinity, which JSON does not have, and a number beyond a double
# (1e400) as inf, which was stored as "Infinity": a value changed. RFC 8259 (section 6) leaves numbers
# beyond a double to each reader, and most read them as doubles, so such an integer is refused too.
def _not_a_number(literal: str) -> float:
    raise _BadNumberError(f"{literal} is not a JSON number")


def _double(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _BadNumberError(f"{text[:40]}{'...' if len(text) > 40 else ''} is beyond the range of a double")
    return value


_DOUBLE_DIGITS = 309  # the largest double, about 1.8e308, has 309 digits: shorter integers are within it


def _integer(text: str) -> int:
    if len(text.lstrip("-")) >= _DOUBLE_DIGITS:
        _double(text)
    return int(text)


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


def _validate(document: dict[str, Any], evolve: bool = False) -> ParsedEvent | Rejection:
    for name in REQUIRED_FIELDS:
        if document.get(name) in (None, ""):
            return Rejection(f"missing_{name}", f"{name} is missing or empty")
    for name in STRING_FIELDS:
        value = document.get(name)
        if value is not None and not isinstance(value, str):
            return Rejection("wrong_type", f"{name}: expected a string, got {_a(value)}")
    event_ts = parse_timestamp(document["event_ts"])
    if event_ts is None:
        return Rejection("bad_timestamp", f"event_ts {document['event_ts'][:60]!r} is not ISO-8601 with a UTC offset")

    properties = document.get("properties")
    if properties is None:
        properties = {}
    if not isinstance(properties, dict):
        return Rejection("wrong_type", f"properties: expected an object, got {_a(properties)}")
    for key, value in properties.items():
        if value is not None and not isinstance(value, str):
            return Rejection("wrong_type", f"properties.{key}: expected a string, got {_a(value)}")
    merged = {key: value for key, value in properties.items() if value is not None}
    extras: dict[str, str] | None = None
    for key, value in document.items():
        if key in KNOWN_FIELDS:
            continue
        if evolve and evolvable_field(key):
            if value is None:
                continue  # a null field is an absent one
            tagged = tag_value(value)
            if tagged is not None:
                extras = {} if extras is None else extras
                extras[key] = tagged
                continue
        if key in merged:  # folding it in would overwrite the property or drop the field: a value lost
            return Rejection("conflicting_field", f"field {key[:60]!r} given both at top level and in properties")
        merged[key] = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))

    device = document.get("device_info")
    device_info: tuple[str | None, str | None, str | None] | None = None
    if device is not None:
        if not isinstance(device, dict):
            return Rejection("wrong_type", f"device_info: expected an object, got {_a(device)}")
        for name in DEVICE_FIELDS:
            value = device.get(name)
            if value is not None and not isinstance(value, str):
                return Rejection("wrong_type", f"device_info.{name}: expected a string, got {_a(value)}")
        device_type, os_name, app_version = (device.get(name) for name in DEVICE_FIELDS)
        device_info = (device_type, os_name, app_version)

    return ParsedEvent(
        event_id=document["event_id"],
        user_id=document["user_id"],
        session_id=document.get("session_id"),
        event_type=document["event_type"],
        event_ts=event_ts,
        properties=merged,
        device_info=device_info,
        extras=extras,
        time_cut=cut_to_microseconds(document["event_ts"]),
    )
