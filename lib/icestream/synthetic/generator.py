"""The generator: clean sessions at a smooth rate, plus anomalies and imperfect data on purpose.

On top of clean traffic (see :mod:`icestream.synthetic.model`) the generator adds, each at a
configurable rate:

- labelled anomalies (``spike``, ``drop``, ``burst``), with a ground-truth record per anomaly;
- duplicates (the same payload sent again, as a retrying producer does);
- late and out-of-order events (sent minutes after their event time);
- malformed records of every kind in :data:`~icestream.synthetic.malformed.MALFORMED_KINDS`;
- unknown extra top-level fields (valid: the ingest keeps them in ``properties``).

Two time modes share one code path: a *history backfill* (event times spread over the last hours)
and *live* (event times from now on; the producer sends each record when its time comes).
Everything is deterministic for a given seed and window.
"""

from __future__ import annotations

import heapq
import math
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from icestream.errors import ConfigError
from icestream.limits import DEFAULT_MAX_EVENT_BYTES, MAX_RECORD_BYTES
from icestream.synthetic.ground_truth import Anomaly, AnomalySpec, check_spec
from icestream.synthetic.malformed import KINESIS_OVERSIZED, MALFORMED_KINDS, malformed_payload
from icestream.synthetic.model import (
    MAX_SESSION_EVENTS,
    User,
    daily_rate_factor,
    event_properties,
    expected_type_shares,
    extra_field,
    first_event_type,
    make_user,
    mean_session_events,
    next_event_type,
)
from icestream.synthetic.wire import Record, encode_event, format_ts, parse_ts

VALID_KINDS = ("event", "duplicate")
RECORD_KINDS = (*VALID_KINDS, *MALFORMED_KINDS, KINESIS_OVERSIZED)
_WARMUP_SECONDS = 20 * 60.0  # sessions start this long before the window, so it opens at full traffic


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
            check_spec(spec)

    @property
    def seconds(self) -> float:
        """Length of the window in seconds."""
        return (self.end - self.start).total_seconds()


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
        self._users = [make_user(self._rng, number) for number in range(config.users)]
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

    def _event(self, user: User, session_id: str, event_type: str, ts: float, gap: float) -> dict[str, Any]:
        return {
            "event_id": self._uuid(),
            "user_id": user.user_id,
            "session_id": session_id,
            "event_type": event_type,
            "event_ts": format_ts(ts),
            "properties": event_properties(self._rng, event_type, gap),
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
            name, value = extra_field(rng)
            event[name] = value
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
        event_type = first_event_type(rng)
        ts = start
        for _ in range(MAX_SESSION_EVENTS):
            gap = min(300.0, 0.5 + rng.expovariate(1 / 15.0))
            if self._start <= ts < self._end and not self._dropped(event_type, ts):
                self._emit(self._event(user, session_id, event_type, ts, gap), ts)
            following = next_event_type(rng, event_type)
            if following is None:
                return
            event_type, ts = following, ts + gap

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
        session_start = self._start - _WARMUP_SECONDS
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
