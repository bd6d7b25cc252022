"""A realistic, seeded stream of user events in the wire format of :mod:`icestream.schema`.

Users have sessions of 1..N events whose types follow a funnel (``page_view`` → ``click`` →
``add_to_cart`` → ``purchase``, plus ``search``, ``login``, ``logout``, ``share`` and ``error``),
each with properties that fit its type, and a device that stays with the user. Session starts follow
a smooth daily rate curve, so per-type rates are Poisson noise around a slow curve: no spikes unless
one is injected on purpose.

On top of that clean traffic the generator adds, each at a configurable rate:

- labelled anomalies (``spike``, ``drop``, ``burst``), with a ground-truth record per anomaly;
- duplicates (the same payload sent again, as a retrying producer does);
- late and out-of-order events (sent minutes after their event time);
- malformed records of every kind in :data:`MALFORMED_KINDS`;
- unknown extra top-level fields (valid: the ingest keeps them in ``properties``).

Two time modes share one code path: a *history backfill* (event times spread over the last hours)
and *live* (event times from now on; the producer sends each record when its time comes).
Everything is deterministic for a given seed and window.
"""

from __future__ import annotations

import base64
import heapq
import json
import math
import random
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.limits import DEFAULT_MAX_EVENT_BYTES, MAX_RECORD_BYTES
from icestream.schema import REQUIRED_FIELDS

EVENT_TYPES = ("page_view", "click", "search", "add_to_cart", "purchase", "login", "logout", "share", "error")
MALFORMED_KINDS = (
    "invalid_json",
    "truncated_json",
    "bad_timestamp",
    "wrong_type_string",
    "wrong_type_number",
    "missing_event_id",
    "missing_event_type",
    "missing_event_ts",
    "missing_user_id",
    "empty_payload",
    "non_utf8",
    "oversized",
    "json_array",
)
# What each malformed kind is, and why the ingest must reject it (also in data/samples/README.md).
MALFORMED_DESCRIPTIONS = {
    "invalid_json": "not JSON: single quotes and a trailing comma",
    "truncated_json": "a valid event cut off halfway through",
    "bad_timestamp": "event_ts is a string but no real time (month 13, hour 25)",
    "wrong_type_string": "a number where a string is due (user_id: 48213)",
    "wrong_type_number": 'an object where a number is due (event_ts: {"epoch_ms": ...})',
    "missing_event_id": "required field event_id left out",
    "missing_event_type": "required field event_type left out",
    "missing_event_ts": "required field event_ts left out",
    "missing_user_id": "required field user_id left out",
    "empty_payload": "zero bytes",
    "non_utf8": "a Latin-1 byte (0xE9) inside a string value: not UTF-8",
    "oversized": "a valid event padded to max_event_bytes + 1 KiB (above the ingest limit, below Kinesis's 1 MiB)",
    "json_array": "a JSON array holding an event, instead of an object",
}
# A record above Kinesis's 1 MiB limit: the producer reports it and never sends it.
KINESIS_OVERSIZED = "kinesis_oversized"
VALID_KINDS = ("event", "duplicate")
RECORD_KINDS = (*VALID_KINDS, *MALFORMED_KINDS, KINESIS_OVERSIZED)
ANOMALY_KINDS = ("spike", "drop", "burst")
GROUND_TRUTH_FILE = "anomalies_truth.jsonl"

_END = "<end>"
# Where sessions start, and the funnel: next-type probabilities after each type (rows sum to 1).
_FIRST = {"page_view": 0.6, "login": 0.25, "search": 0.15}
_NEXT: dict[str, dict[str, float]] = {
    "page_view": {"page_view": 0.30, "click": 0.30, "search": 0.10, "add_to_cart": 0.05, "share": 0.02, "error": 0.01},
    "click": {"page_view": 0.35, "add_to_cart": 0.18, "click": 0.10, "search": 0.05, "error": 0.01},
    "search": {"click": 0.45, "page_view": 0.20, "search": 0.15, "error": 0.01},
    "add_to_cart": {"purchase": 0.30, "page_view": 0.30, "add_to_cart": 0.10, "click": 0.05, "error": 0.01},
    "purchase": {"page_view": 0.25, "logout": 0.20, "share": 0.05},
    "login": {"page_view": 0.70, "search": 0.25, "error": 0.05},  # error here is a failed login
    "logout": {},
    "share": {"page_view": 0.50},
    "error": {"page_view": 0.40, "login": 0.10},
}
for _row in _NEXT.values():
    _row[_END] = round(1.0 - sum(_row.values()), 10)
MAX_SESSION_EVENTS = 60

PROPERTY_FIELDS: dict[str, tuple[str, ...]] = {
    "page_view": ("page", "referrer", "duration_ms"),
    "click": ("page", "element"),
    "search": ("query", "results"),
    "add_to_cart": ("product_id", "quantity", "price"),
    "purchase": ("order_id", "amount", "currency", "items"),
    "login": ("method",),
    "logout": ("reason",),
    "share": ("channel", "product_id"),
    "error": ("code", "message", "page"),
}
_PAGES = ("/", "/home", "/search", "/deals", "/cart", "/checkout", "/account", "/help") + tuple(  # noqa: RUF005
    f"/product/p-{number:04d}" for number in range(1, 41)
)
_REFERRERS = ("direct", "google", "newsletter", "instagram", "partner", "app_push")
_ELEMENTS = ("buy_button", "image", "review_tab", "size_picker", "menu", "banner", "recommendation")
_QUERIES = ("running shoes", "rain jacket", "usb-c cable", "coffee grinder", "desk lamp", "yoga mat",
            "backpack", "headphones", "gift card", "winter boots", "water bottle", "phone case")  # fmt: skip
_ERRORS = (("500", "internal server error"), ("502", "bad gateway"), ("504", "gateway timeout"),
           ("401", "session expired"), ("PAY-17", "payment declined"), ("JS-1", "script error"))  # fmt: skip
_DEVICES = (  # device_type, weight, (os, weight) pairs, app versions (newest most used)
    ("mobile", 0.55, (("iOS", 0.45), ("Android", 0.55)), ("5.3.1", "5.3.0", "5.2.4", "5.1.0")),
    ("desktop", 0.35, (("Windows", 0.55), ("macOS", 0.35), ("Linux", 0.10)), ("web-2026.11", "web-2026.10")),
    ("tablet", 0.10, (("iPadOS", 0.6), ("Android", 0.4)), ("5.3.1", "5.2.4")),
)
_EXTRA_FIELDS = (("experiment", ("checkout_v2", "control", "search_rank_b")), ("locale", ("en-US", "de-DE", "fr-FR")))


@dataclass(frozen=True)
class AnomalySpec:
    """An anomaly to inject: what happens to which event type, when, and how strongly.

    Attributes:
        kind: ``spike`` or ``burst`` (extra events of the type) or ``drop`` (events of the type lost).
        event_type: The event type affected.
        factor: Rate during the anomaly as a multiple of the baseline (≥ 3 for a spike, ≤ 0.2 for a
            drop, ≥ 5 for a burst of a rare type, so a 5-minute window detector sees it clearly).
        start_minutes: Start, in minutes after the window start; None places it automatically.
        duration_minutes: Length in event time (≥ 10 minutes, so several windows cover it).
    """

    kind: str
    event_type: str
    factor: float
    start_minutes: float | None = None
    duration_minutes: float = 15.0


@dataclass(frozen=True)
class Anomaly:
    """Ground truth of one injected anomaly, as written to the JSON-lines file (times are ISO UTC)."""

    kind: str
    event_type: str
    window_start: str
    window_end: str
    factor: float
    baseline_per_minute: float  # expected events of the type per minute without the anomaly

    @property
    def start(self) -> datetime:
        """Window start as a datetime (UTC)."""
        return parse_ts(self.window_start)

    @property
    def end(self) -> datetime:
        """Window end (exclusive) as a datetime (UTC)."""
        return parse_ts(self.window_end)


DEFAULT_ANOMALIES = (
    AnomalySpec("spike", "search", 4.0),  # a crawler hammering search
    AnomalySpec("drop", "add_to_cart", 0.1),  # the cart service breaks
    AnomalySpec("burst", "error", 8.0),  # a bad deploy
)


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate. Build it with :func:`backfill_config` or :func:`live_config`.

    Attributes:
        start: First event time (UTC).
        end: Event times are before this (UTC).
        rate: Mean clean events per second over the window (anomalies add or remove some).
        seed: Same seed and window, same records.
        users: How many distinct users.
        daily_curve: Modulate the rate by time of day (off for live, where the rate is a target).
        anomalies: Anomalies to inject.
        duplicate_rate: Share of events sent a second time.
        late_rate: Share of events sent late (after newer events).
        late_seconds: Range of the delay of a late event.
        bad_rate: Malformed records per clean event (added, so clean rates stay as they are).
        malformed_kinds: Kinds to draw malformed records from, in turn.
        extra_field_rate: Share of events with an unknown extra top-level field.
        max_event_bytes: The ingest's size limit; an ``oversized`` record is above it.
        kinesis_oversized: Records above Kinesis's 1 MiB limit to include (the producer reports them).
    """

    start: datetime
    end: datetime
    rate: float
    seed: int = 0
    users: int = 5000
    daily_curve: bool = True
    anomalies: tuple[AnomalySpec, ...] = ()
    duplicate_rate: float = 0.01
    late_rate: float = 0.02
    late_seconds: tuple[float, float] = (30.0, 600.0)
    bad_rate: float = 0.005
    malformed_kinds: tuple[str, ...] = MALFORMED_KINDS
    extra_field_rate: float = 0.02
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    kinesis_oversized: int = 0

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ConfigError("start and end must be timezone-aware datetimes (use datetime.now(UTC)).")
        if self.end <= self.start:
            raise ConfigError(f"end {self.end} must be after start {self.start}.")
        if not self.rate > 0:
            raise ConfigError(f"rate: {self.rate} must be a positive number of events per second.")
        if self.users < 1:
            raise ConfigError(f"users: {self.users} must be at least 1.")
        for name in ("duplicate_rate", "late_rate", "bad_rate", "extra_field_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name}: {value} must be between 0 and 1.")
        unknown = sorted(set(self.malformed_kinds) - set(MALFORMED_KINDS))
        if unknown or (self.bad_rate > 0 and not self.malformed_kinds):
            raise ConfigError(f"malformed_kinds: choose from {', '.join(MALFORMED_KINDS)} (got {unknown or 'none'}).")
        if not 2 * 1024 <= self.max_event_bytes <= MAX_RECORD_BYTES - 64 * 1024:
            raise ConfigError(f"max_event_bytes: {self.max_event_bytes} must be between 2 KiB and 960 KiB.")
        for spec in self.anomalies:
            _check_spec(spec)

    @property
    def seconds(self) -> float:
        """Length of the window in seconds."""
        return (self.end - self.start).total_seconds()


def _check_spec(spec: AnomalySpec) -> None:
    if spec.kind not in ANOMALY_KINDS:
        raise ConfigError(f"anomaly kind {spec.kind!r}: choose one of {', '.join(ANOMALY_KINDS)}.")
    if spec.event_type not in EVENT_TYPES:
        raise ConfigError(f"anomaly event type {spec.event_type!r}: choose one of {', '.join(EVENT_TYPES)}.")
    if spec.kind == "drop" and not 0.0 <= spec.factor < 1.0:
        raise ConfigError(f"drop factor {spec.factor}: must be in [0, 1) (the share of events that remains).")
    if spec.kind != "drop" and spec.factor <= 1.0:
        raise ConfigError(f"{spec.kind} factor {spec.factor}: must be above 1 (a multiple of the baseline).")
    if spec.duration_minutes <= 0:
        raise ConfigError(f"anomaly duration {spec.duration_minutes}: must be positive minutes.")


def parse_anomalies(text: str | None) -> tuple[AnomalySpec, ...]:
    """Parse an anomaly list such as ``spike:search:4,drop:add_to_cart:0.1@60+15``.

    Each item is ``kind:event_type[:factor][@start_minutes[+duration_minutes]]``; ``default`` means
    :data:`DEFAULT_ANOMALIES` and ``none`` (or empty) means no anomalies.

    Args:
        text: The list.

    Returns:
        The anomaly specs.

    Raises:
        ConfigError: If an item cannot be parsed or names an unknown kind or event type.
    """
    if text is None or text.strip().lower() in ("", "none"):
        return ()
    if text.strip().lower() == "default":
        return DEFAULT_ANOMALIES
    defaults = {"spike": 4.0, "drop": 0.1, "burst": 8.0}
    specs = []
    for item in text.split(","):
        what, _, when = item.strip().partition("@")
        parts = what.split(":")
        try:
            kind, event_type = parts[0], parts[1]
            factor = float(parts[2]) if len(parts) > 2 else defaults.get(kind, 0.0)
            start_text, _, duration_text = when.partition("+")
            spec = AnomalySpec(
                kind,
                event_type,
                factor,
                float(start_text) if start_text else None,
                float(duration_text) if duration_text else 15.0,
            )
        except (IndexError, ValueError):
            raise ConfigError(
                f"anomalies: cannot read {item!r}; write kind:event_type[:factor][@start_min[+duration_min]], "
                "e.g. spike:search:4@30+15."
            ) from None
        _check_spec(spec)
        specs.append(spec)
    return tuple(specs)


def backfill_config(
    hours: float = 3.0, count: int | None = None, end: datetime | None = None, **options: Any
) -> GeneratorConfig:
    """A history backfill: event times spread over the ``hours`` before ``end``.

    Args:
        hours: Length of the history.
        count: Approximate number of clean events (default 3 per second of history).
        end: End of the history (default now, rounded down to the second).
        **options: Other :class:`GeneratorConfig` fields (seed, anomalies, bad_rate ...).

    Returns:
        The configuration.
    """
    if not hours > 0:
        raise ConfigError(f"backfill hours: {hours} must be positive.")
    end = end or datetime.now(UTC).replace(microsecond=0)
    seconds = hours * 3600.0
    rate = (count / seconds) if count else options.pop("rate", 3.0)
    options.pop("rate", None)
    return GeneratorConfig(start=end - timedelta(seconds=seconds), end=end, rate=rate, **options)


def live_config(rate: float, seconds: float, start: datetime | None = None, **options: Any) -> GeneratorConfig:
    """Live events: event times from ``start`` (default now) on, at ``rate`` events per second.

    Args:
        rate: Target events per second.
        seconds: How long the live stream lasts.
        start: First event time (default now).
        **options: Other :class:`GeneratorConfig` fields; ``daily_curve`` defaults to off.

    Returns:
        The configuration.
    """
    if not seconds > 0:
        raise ConfigError(f"duration: {seconds} must be a positive number of seconds.")
    start = start or datetime.now(UTC)
    options.setdefault("daily_curve", False)
    return GeneratorConfig(start=start, end=start + timedelta(seconds=seconds), rate=rate, **options)


@dataclass(frozen=True, slots=True)
class Record:
    """One Kinesis record to send.

    Attributes:
        data: The payload bytes.
        partition_key: The Kinesis partition key (the user id, else a random key).
        kind: ``event``, ``duplicate``, a :data:`MALFORMED_KINDS` name, ``kinesis_oversized`` or ``file``.
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


def format_ts(epoch_seconds: float) -> str:
    """Format epoch seconds as ISO-8601 UTC with milliseconds and ``Z`` (the wire format)."""
    whole = math.floor(epoch_seconds)
    millis = min(999, round((epoch_seconds - whole) * 1000))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z"


def parse_ts(text: str) -> datetime:
    """Parse an ISO-8601 timestamp with ``Z`` or an offset into an aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def encode_event(event: dict[str, Any]) -> bytes:
    """Encode one event as its wire payload (compact UTF-8 JSON)."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


def daily_rate_factor(epoch_seconds: float) -> float:
    """Relative traffic by time of day: lowest near 03:00 UTC (0.6), highest near 15:00 UTC (1.4)."""
    hour = (epoch_seconds % 86400.0) / 3600.0
    return 1.0 + 0.4 * math.sin(2.0 * math.pi * (hour - 9.0) / 24.0)


def _expected_visits() -> dict[str, float]:
    """Expected events of each type per session, from the funnel's transition probabilities."""
    visits = dict.fromkeys(EVENT_TYPES, 0.0)
    current = {name: _FIRST.get(name, 0.0) for name in EVENT_TYPES}
    for _ in range(MAX_SESSION_EVENTS):
        following = dict.fromkeys(EVENT_TYPES, 0.0)
        for name, mass in current.items():
            visits[name] += mass
            for target, probability in _NEXT[name].items():
                if target != _END:
                    following[target] += mass * probability
        current = following
    return visits


def expected_type_shares() -> dict[str, float]:
    """Expected share of each event type in clean traffic (the shares sum to 1)."""
    visits = _expected_visits()
    total = sum(visits.values())
    return {name: count / total for name, count in visits.items()}


def mean_session_events() -> float:
    """Expected events per session."""
    return sum(_expected_visits().values())


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


def malformed_payload(
    kind: str,
    event: dict[str, Any] | None = None,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
) -> bytes:
    """Build one malformed payload of ``kind`` from a valid event (deterministic).

    Args:
        kind: One of :data:`MALFORMED_KINDS`, or ``kinesis_oversized`` (above 1 MiB: never sendable).
        event: The valid event to spoil (default :func:`sample_event`).
        max_event_bytes: The ingest's size limit; ``oversized`` payloads exceed it by about 1 KiB.

    Returns:
        The payload bytes.

    Raises:
        ConfigError: If ``kind`` is unknown.
    """
    event = dict(event or sample_event())
    if kind == "invalid_json":
        # Single quotes and a trailing comma: looks like JSON, is not.
        return f"{{'event_id': '{event['event_id']}', 'event_type': '{event['event_type']}',}}".encode()
    if kind == "truncated_json":
        whole = encode_event(event)
        return whole[: len(whole) // 2]
    if kind == "bad_timestamp":
        return encode_event({**event, "event_ts": "2026-13-45T25:61:00Z"})
    if kind == "wrong_type_string":
        # A number where a string is due.
        return encode_event({**event, "user_id": 48213})
    if kind == "wrong_type_number":
        # An object where a number is due: the time as an epoch-millisecond object instead of a value.
        return encode_event({**event, "event_ts": {"epoch_ms": 1795237200123}})
    if kind.startswith("missing_") and kind[len("missing_") :] in REQUIRED_FIELDS:
        event.pop(kind[len("missing_") :])
        return encode_event(event)
    if kind == "empty_payload":
        return b""
    if kind == "non_utf8":
        # Latin-1 bytes in a string value: valid JSON structure, invalid UTF-8.
        whole = encode_event({**event, "properties": {**event.get("properties", {}), "page": "/caf\u00e9"}})
        return whole.replace("/caf\u00e9".encode(), "/caf\u00e9".encode("latin-1"))
    if kind in ("oversized", KINESIS_OVERSIZED):
        target = max_event_bytes + 1024 if kind == "oversized" else MAX_RECORD_BYTES + 1024
        base = len(encode_event({**event, "properties": {**event.get("properties", {}), "blob": ""}}))
        return encode_event({**event, "properties": {**event.get("properties", {}), "blob": "x" * (target - base)}})
    if kind == "json_array":
        return encode_event([event])  # type: ignore[arg-type]
    raise ConfigError(f"malformed kind {kind!r}: choose one of {', '.join(MALFORMED_KINDS)}.")


@dataclass
class _User:
    user_id: str
    device: dict[str, str]


class EventGenerator:
    """Generate the records of one configuration, lazily and in send order.

    Iterate it once; afterwards ``counts`` holds what was yielded of each kind and ``type_counts``
    the clean events by type. ``ground_truth`` is known before iterating.

    Args:
        config: What to generate.
    """

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        # The window is part of the seed, so runs at different times never reuse event ids.
        self._rng = random.Random(f"icestream:{config.seed}:{config.start.isoformat()}:{config.end.isoformat()}")  # noqa: S311 - test data, not security
        self.counts: Counter[str] = Counter()
        self.type_counts: Counter[str] = Counter()
        self._start = config.start.timestamp()
        self._end = config.end.timestamp()
        self._shares = expected_type_shares()
        self._session_events = mean_session_events()
        self._curve_mean = self._mean_curve()
        self._users = [self._make_user(number) for number in range(config.users)]
        self._malformed_turn = self._rng.randrange(len(MALFORMED_KINDS))
        self.ground_truth: list[Anomaly] = self._place_anomalies()
        self._drops = [
            (parse_ts(a.window_start).timestamp(), parse_ts(a.window_end).timestamp(), a.event_type, a.factor)
            for a in self.ground_truth
            if a.kind == "drop"
        ]
        self._heap: list[tuple[float, int, Record]] = []
        self._sequence = 0
        self._iterated = False

    # -- set-up -------------------------------------------------------------------------------
    def _mean_curve(self) -> float:
        if not self.config.daily_curve:
            return 1.0
        steps = 100
        width = (self._end - self._start) / steps
        return sum(daily_rate_factor(self._start + (step + 0.5) * width) for step in range(steps)) / steps

    def rate_at(self, epoch_seconds: float) -> float:
        """Expected clean events per second at a time (the rate curve, before anomalies)."""
        if not self.config.daily_curve:
            return self.config.rate
        return self.config.rate * daily_rate_factor(epoch_seconds) / self._curve_mean

    def _make_user(self, number: int) -> _User:
        rng = self._rng
        device_type, _, systems, versions = rng.choices(_DEVICES, weights=[entry[1] for entry in _DEVICES])[0]
        os_name = rng.choices([name for name, _ in systems], weights=[weight for _, weight in systems])[0]
        version = rng.choices(versions, weights=range(len(versions), 0, -1))[0]
        return _User(f"u-{number:05d}", {"device_type": device_type, "os": os_name, "app_version": version})

    def _place_anomalies(self) -> list[Anomaly]:
        specs = self.config.anomalies
        span_minutes = (self._end - self._start) / 60.0
        placed = []
        for index, spec in enumerate(specs):
            # Automatic placement: evenly spaced, clear of the edges, so windows never overlap.
            start_minutes = (
                spec.start_minutes
                if spec.start_minutes is not None
                else span_minutes * (index + 1) / (len(specs) + 1) - spec.duration_minutes / 2
            )
            start = self._start + start_minutes * 60.0
            if spec.start_minutes is None:
                start = math.floor(start / 60.0) * 60.0  # whole minutes, like the detector's windows
            end = start + spec.duration_minutes * 60.0
            if start < self._start or end > self._end:
                raise ConfigError(
                    f"anomaly {spec.kind}:{spec.event_type} at {start_minutes:.1f}+{spec.duration_minutes:.1f} min "
                    f"does not fit in the {span_minutes:.1f}-minute window; "
                    "make the window longer or the anomaly shorter."
                )
            baseline = self.rate_at((start + end) / 2) * self._shares[spec.event_type] * 60.0
            placed.append(
                Anomaly(spec.kind, spec.event_type, format_ts(start), format_ts(end), spec.factor, round(baseline, 3))
            )
        return placed

    # -- events -------------------------------------------------------------------------------
    def _uuid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _properties(self, event_type: str, gap: float) -> dict[str, str]:
        rng = self._rng
        if event_type == "page_view":
            return {"page": rng.choice(_PAGES), "referrer": rng.choice(_REFERRERS), "duration_ms": str(int(gap * 1000))}
        if event_type == "click":
            return {"page": rng.choice(_PAGES), "element": rng.choice(_ELEMENTS)}
        if event_type == "search":
            return {"query": rng.choice(_QUERIES), "results": str(rng.randint(0, 240))}
        if event_type == "add_to_cart":
            return {
                "product_id": f"p-{rng.randint(1, 40):04d}",
                "quantity": str(rng.choices((1, 2, 3), (0.8, 0.15, 0.05))[0]),
                "price": f"{rng.uniform(4, 250):.2f}",
            }
        if event_type == "purchase":
            return {
                "order_id": f"o-{rng.getrandbits(40):010x}",
                "amount": f"{rng.lognormvariate(3.8, 0.7):.2f}",
                "currency": rng.choices(("EUR", "USD", "GBP"), (0.5, 0.35, 0.15))[0],
                "items": str(rng.randint(1, 6)),
            }
        if event_type == "login":
            return {"method": rng.choices(("password", "sso", "passkey"), (0.6, 0.25, 0.15))[0]}
        if event_type == "logout":
            return {"reason": rng.choice(("user", "timeout"))}
        if event_type == "share":
            return {"channel": rng.choice(("link", "whatsapp", "email")), "product_id": f"p-{rng.randint(1, 40):04d}"}
        code, message = rng.choice(_ERRORS)
        return {"code": code, "message": message, "page": rng.choice(_PAGES)}

    def _event(self, user: _User, session_id: str, event_type: str, ts: float, gap: float) -> dict[str, Any]:
        return {
            "event_id": self._uuid(),
            "user_id": user.user_id,
            "session_id": session_id,
            "event_type": event_type,
            "event_ts": format_ts(ts),
            "properties": self._properties(event_type, gap),
            "device_info": user.device,
        }

    def _push(self, record: Record) -> None:
        self._sequence += 1
        heapq.heappush(self._heap, (record.send_at, self._sequence, record))

    def _dropped(self, event_type: str, ts: float) -> bool:
        for start, end, dropped_type, keep in self._drops:
            if dropped_type == event_type and start <= ts < end and self._rng.random() >= keep:
                self.counts["anomaly_dropped"] += 1
                return True
        return False

    def _emit(self, event: dict[str, Any], ts: float) -> None:
        """Queue one clean event, and the duplicates, lateness, extras and bad records drawn for it."""
        config, rng = self.config, self._rng
        extra = rng.random() < config.extra_field_rate
        if extra:
            name, values = rng.choice(_EXTRA_FIELDS)
            event[name] = rng.choice(values)
        # A late event is still sent within the window, so a live run ends on time.
        room = self._end - ts
        late = rng.random() < config.late_rate and room > config.late_seconds[0]
        send_at = ts + rng.uniform(config.late_seconds[0], min(config.late_seconds[1], room)) if late else ts
        data = encode_event(event)
        key, event_type, event_id = event["user_id"], event["event_type"], event["event_id"]
        self._push(Record(data, key, "event", ts, send_at, event_type, event_id, late, extra))
        if rng.random() < config.duplicate_rate:
            # A retrying producer resends the same bytes shortly after.
            self._push(Record(data, key, "duplicate", ts, send_at + rng.uniform(0.05, 2.0), event_type, event_id))
        if config.bad_rate and rng.random() < config.bad_rate:
            kind = config.malformed_kinds[self._malformed_turn % len(config.malformed_kinds)]
            self._malformed_turn += 1
            bad = malformed_payload(kind, event, max_event_bytes=config.max_event_bytes)
            bad_key = key if kind not in ("missing_user_id", "wrong_type_string") else f"k-{rng.getrandbits(32):08x}"
            self._push(Record(bad, bad_key, kind, ts, send_at + rng.uniform(0.0, 1.0), event_type, event_id))

    def _session(self, start: float) -> None:
        rng = self._rng
        user = rng.choice(self._users)
        session_id = f"s-{rng.getrandbits(48):012x}"
        event_type = rng.choices(tuple(_FIRST), weights=tuple(_FIRST.values()))[0]
        ts = start
        for _ in range(MAX_SESSION_EVENTS):
            gap = min(300.0, 0.5 + rng.expovariate(1 / 15.0))
            if self._start <= ts < self._end and not self._dropped(event_type, ts):
                self._emit(self._event(user, session_id, event_type, ts, gap), ts)
            row = _NEXT[event_type]
            event_type = rng.choices(tuple(row), weights=tuple(row.values()))[0]
            if event_type == _END:
                return
            ts += gap

    def _anomaly_extras(self) -> None:
        """Queue the extra events of spikes and bursts: a Poisson stream at (factor - 1) x baseline."""
        rng = self._rng
        for anomaly in self.ground_truth:
            if anomaly.kind == "drop":
                continue
            start, end = parse_ts(anomaly.window_start).timestamp(), parse_ts(anomaly.window_end).timestamp()
            extra_per_second = (anomaly.factor - 1.0) * anomaly.baseline_per_minute / 60.0
            ts = start + rng.expovariate(extra_per_second)
            while ts < end:
                user = rng.choice(self._users)
                event = self._event(user, f"s-{rng.getrandbits(48):012x}", anomaly.event_type, ts, 1.0)
                self.counts["anomaly_extra"] += 1
                self._emit(event, ts)
                ts += rng.expovariate(extra_per_second)

    def _oversized_for_kinesis(self) -> None:
        count = self.config.kinesis_oversized
        for index in range(count):
            ts = self._start + (self._end - self._start) * (index + 1) / (count + 1)
            user = self._rng.choice(self._users)
            event = self._event(user, f"s-{self._rng.getrandbits(48):012x}", "page_view", ts, 1.0)
            data = malformed_payload(KINESIS_OVERSIZED, event)
            self._push(Record(data, user.user_id, KINESIS_OVERSIZED, ts, ts, "page_view", event["event_id"]))

    def _yield(self, record: Record) -> Record:
        self.counts[record.kind] += 1
        if record.kind == "event":
            self.type_counts[record.event_type or ""] += 1
            self.counts["late"] += record.late
            self.counts["extra_fields"] += record.extra_fields
        return record

    def __iter__(self) -> Iterator[Record]:
        if self._iterated:
            raise RuntimeError("An EventGenerator is iterated once; make a new one for another pass.")
        self._iterated = True
        self._anomaly_extras()
        self._oversized_for_kinesis()
        rng = self._rng
        # Sessions start before the window so that its first minutes already have full traffic.
        warmup = 20 * 60.0
        session_start = self._start - warmup
        while session_start < self._end:
            # Records already queued can be sent: every later session starts (and sends) after this.
            while self._heap and self._heap[0][0] < session_start:
                yield self._yield(heapq.heappop(self._heap)[2])
            self._session(session_start)
            sessions_per_second = self.rate_at(max(session_start, self._start)) / self._session_events
            session_start += rng.expovariate(sessions_per_second)
        while self._heap:
            yield self._yield(heapq.heappop(self._heap)[2])

    def summary(self) -> dict[str, Any]:
        """Counts of what was yielded, for a JSON summary.

        Returns:
            ``records`` (all yielded), ``counts`` by kind and flag, ``type_counts`` of clean events,
            and ``malformed`` (all malformed kinds together).
        """
        records = sum(self.counts[kind] for kind in RECORD_KINDS)
        return {
            "records": records,
            "events": self.counts["event"],
            "malformed": sum(self.counts[kind] for kind in MALFORMED_KINDS),
            "counts": dict(sorted(self.counts.items())),
            "type_counts": dict(sorted(self.type_counts.items())),
        }


def generate(config: GeneratorConfig) -> tuple[list[Record], EventGenerator]:
    """Generate every record of ``config`` at once (for backfills and tests).

    Returns:
        The records in send order, and the generator (its ``counts`` and ``ground_truth``).
    """
    generator = EventGenerator(config)
    return list(generator), generator


def decode_events(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Decode the clean events among ``records`` (kind ``event``) into dicts."""
    return [json.loads(record.data) for record in records if record.kind == "event"]


def ground_truth_path(settings: Settings) -> Path:
    """Where the ground truth of the injected anomalies is written: ``<run_dir>/anomalies_truth.jsonl``."""
    return settings.path("run_dir") / GROUND_TRUTH_FILE


def write_ground_truth(anomalies: Sequence[Anomaly], path: Path, append: bool = False) -> Path:
    """Write anomalies as JSON lines (one object per anomaly, fields of :class:`Anomaly`).

    Args:
        anomalies: The ground truth.
        path: The file.
        append: Add to the file instead of replacing it.

    Returns:
        ``path``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as out:
        for anomaly in anomalies:
            out.write(json.dumps(asdict(anomaly)) + "\n")
    return path


def read_ground_truth(path: Path) -> list[Anomaly]:
    """Read the anomalies written by :func:`write_ground_truth` (empty when the file is absent)."""
    if not path.is_file():
        return []
    return [Anomaly(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


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


# -- committed samples --------------------------------------------------------------------------
SAMPLE_EVENTS_FILE = "events.jsonl"
SAMPLE_MALFORMED_FILE = "malformed.jsonl"
SAMPLE_SEED = 2026
SAMPLE_END = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)


def sample_records() -> tuple[list[Record], list[dict[str, Any]]]:
    """The records behind ``data/samples/``: about 300 clean events, one malformed of each kind.

    Returns:
        The clean event records (no duplicates or bad records), and one row per malformed kind
        (``kind``, ``description``, ``size``, ``payload_base64``).
    """
    config = backfill_config(hours=0.5, count=300, end=SAMPLE_END, seed=SAMPLE_SEED, users=60, duplicate_rate=0.0,
                             late_rate=0.0, bad_rate=0.0, extra_field_rate=0.03)  # fmt: skip
    records, _ = generate(config)
    base = json.loads(records[0].data)
    malformed = [
        {
            "kind": kind,
            "description": MALFORMED_DESCRIPTIONS[kind],
            "size": len(payload),
            "payload_base64": base64.b64encode(payload).decode(),
        }
        for kind in MALFORMED_KINDS
        for payload in [malformed_payload(kind, base)]
    ]
    return records, malformed


def write_samples(folder: Path) -> tuple[Path, Path]:
    """Write the committed samples (regenerate with ``python -c "...write_samples(Path('data/samples'))"``).

    Args:
        folder: Usually ``data/samples``.

    Returns:
        The events file and the malformed file.
    """
    records, malformed = sample_records()
    folder.mkdir(parents=True, exist_ok=True)
    events_path, malformed_path = folder / SAMPLE_EVENTS_FILE, folder / SAMPLE_MALFORMED_FILE
    events_path.write_bytes(b"".join(record.data + b"\n" for record in records))
    malformed_path.write_text("".join(json.dumps(row) + "\n" for row in malformed), encoding="utf-8")
    return events_path, malformed_path


def read_malformed_samples(path: Path) -> dict[str, bytes]:
    """Read ``data/samples/malformed.jsonl`` into kind → payload bytes."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["kind"]: base64.b64decode(row["payload_base64"]) for row in rows}
