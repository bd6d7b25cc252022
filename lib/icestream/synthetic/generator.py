"""The generator: clean sessions at a smooth rate, plus anomalies and imperfect data on purpose.

On top of clean traffic (see :mod:`icestream.synthetic.model`) the generator adds, each at a
configurable rate:

- labelled anomalies (``spike``, ``drop``, ``burst``), with a ground-truth record per anomaly;
- duplicates (the same payload sent again, as a retrying producer does);
- late and out-of-order events (sent minutes after their event time);
- malformed records of every kind in :data:`~icestream.synthetic.malformed.MALFORMED_KINDS`;
- unknown extra top-level fields (valid: the ingest keeps them in ``properties``).

Two time modes share one code path: a *history backfill* (event times over the last hours) and *live*
(event times from now on, sent when their time comes); either can hold an exact number of records
(:mod:`icestream.synthetic.schedule`). Every event carries its run's id in ``properties["run_id"]``,
so a table holding many runs can be read one run at a time. The same configuration gives the same records.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from icestream.errors import ConfigError
from icestream.limits import DEFAULT_MAX_EVENT_BYTES, MAX_RECORD_BYTES
from icestream.synthetic.ground_truth import Anomaly, AnomalySpec, check_spec, place_anomalies
from icestream.synthetic.kinds import kinds_and_flags
from icestream.synthetic.malformed import KINESIS_OVERSIZED, MALFORMED_KINDS, malformed_payload
from icestream.synthetic.model import (
    User,
    event_properties,
    expected_type_shares,
    extra_field,
    make_user,
    mean_session_events,
    rate_curve,
    session_events,
)
from icestream.synthetic.schedule import Schedule, thinning_plan
from icestream.synthetic.second_kind import TableTally, check_second_kind, mix_second_kind, order_records
from icestream.synthetic.wire import Record, encode_event, format_ts, parse_ts, uuid4_text

RUN_ID_PROPERTY = "run_id"  # the key in every event's properties that names its production run


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate. Build it with :func:`backfill_config` or :func:`live_config`.

    Attributes:
        start: First event time (UTC).
        end: Event times are before this (UTC); with ``open_end``, where ``records`` are expected to be
            reached.
        rate: Mean clean events per second over the window (anomalies add or remove some).
        seed: Same configuration, same records.
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
        records: Exactly this many records of every kind (None: as many as the rate gives); see
            :mod:`icestream.synthetic.schedule`. Order events come on top of them.
        order_rate: Order events per second beside the user events (0: none); and
        new_field_after: From this many seconds after ``start`` on, user events carry ``app_version``
            at the top level (None: never); both in :mod:`icestream.synthetic.second_kind`.
        open_end: With ``records``: generation goes on past ``end`` if the records are not reached by
            then and stops as soon as they are (live); otherwise the window is thinned to them (backfill).
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
    records: int | None = None
    open_end: bool = False
    order_rate: float = field(default=0.0, repr=False)  # off by default; out of repr, so run ids stay
    new_field_after: float | None = field(default=None, repr=False)

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
        if (self.records is not None and self.records < max(1, self.kinesis_oversized)) or (
            self.open_end and self.records is None
        ):
            raise ConfigError(f"records: {self.records}; at least 1 and all kinesis_oversized (open_end needs it).")
        for spec in self.anomalies:
            check_spec(spec)
        check_second_kind(self.order_rate, self.new_field_after)

    @property
    def seconds(self) -> float:
        """Length of the window in seconds."""
        return (self.end - self.start).total_seconds()

    @property
    def records_per_event(self) -> float:
        """Records sent per clean event on average: the event, its duplicates and malformed records."""
        return 1.0 + self.duplicate_rate + self.bad_rate

    @property
    def run_id(self) -> str:
        """The run's id, carried by every event (``properties["run_id"]``): a digest of this configuration."""
        second = f"{self.order_rate}:{self.new_field_after}" if self.second_kind else ""
        return "run-" + hashlib.blake2b((repr(self) + second).encode(), digest_size=6).hexdigest()

    @property
    def second_kind(self) -> bool:
        """Whether order events or the mid-run field are on (:mod:`icestream.synthetic.second_kind`)."""
        return bool(self.order_rate) or self.new_field_after is not None

    @property
    def new_field_since(self) -> float | None:
        """Time T (epoch seconds) from which user events carry the new field, or None."""
        return None if self.new_field_after is None else self.start.timestamp() + self.new_field_after


def _with_record_rate(config: GeneratorConfig, records_per_second: float) -> GeneratorConfig:
    return replace(config, rate=records_per_second / config.records_per_event)


def backfill_config(
    hours: float = 3.0,
    count: int | None = None,
    end: datetime | None = None,
    records: int | None = None,
    **options: Any,
) -> GeneratorConfig:
    """A history backfill: event times spread over the ``hours`` before ``end``.

    Args:
        hours: Length of the history.
        count: Mean number of clean events: it sets the rate, and the total varies with the seed
            (default 3 events per second of history). Leave it out when ``records`` is given.
        end: End of the history (default now, rounded down to the second).
        records: Exactly this many records of every kind, spread over the whole history.
        **options: Other :class:`GeneratorConfig` fields (seed, anomalies, bad_rate ...).

    Returns:
        The configuration.

    Raises:
        ConfigError: If ``hours`` is not positive, or both ``count`` and ``records`` are given.
    """
    if not hours > 0:
        raise ConfigError(f"backfill hours: {hours} must be positive.")
    if count and records:
        raise ConfigError("backfill: give count (mean clean events) or records (exact records), not both.")
    end = end or datetime.now(UTC).replace(microsecond=0)
    seconds = hours * 3600.0
    rate = (count / seconds) if count else options.pop("rate", 3.0)
    options.pop("rate", None)
    config = GeneratorConfig(start=end - timedelta(seconds=seconds), end=end, rate=rate, records=records, **options)
    return _with_record_rate(config, records / seconds) if records else config


def live_config(
    rate: float,
    seconds: float | None = None,
    start: datetime | None = None,
    records: int | None = None,
    **options: Any,
) -> GeneratorConfig:
    """Live records: event times from ``start`` (default now) on, at ``rate`` records per second.

    Args:
        rate: Records per second of every kind, on average (clean events are about 1.5 % fewer).
        seconds: How long the live stream lasts; or
        records: Exactly this many records: the stream ends when they are reached, after about
            ``records / rate`` seconds.
        start: First event time (default now).
        **options: Other :class:`GeneratorConfig` fields; ``daily_curve`` defaults to off.

    Returns:
        The configuration.

    Raises:
        ConfigError: Unless exactly one of ``seconds`` and ``records`` is given, positive.
    """
    if (seconds is None) == (records is None) or not (seconds or records or 0) > 0:
        raise ConfigError(f"live production needs a duration or a record count (one, positive): {seconds}, {records}.")
    if not rate > 0:
        raise ConfigError(f"rate: {rate} must be a positive number of records per second.")
    start = start or datetime.now(UTC)
    options.setdefault("daily_curve", False)
    length = seconds if seconds is not None else (records or 0) / rate  # records is given when seconds is not
    config = GeneratorConfig(
        start=start,
        end=start + timedelta(seconds=length),
        rate=rate,
        records=records,
        open_end=records is not None,
        **options,
    )
    return _with_record_rate(config, rate)


class EventGenerator:
    """Generate the records of one configuration, lazily and in send order.

    Iterate it once; afterwards ``counts`` holds what was yielded of each kind and ``type_counts``
    the clean events by type. ``ground_truth`` is known before iterating. With ``config.records`` it
    yields exactly that many user records, nothing held back (:mod:`icestream.synthetic.schedule`);
    order events come on top, and ``tables`` then counts the rows per table (``tables.truths()``).

    Args:
        config: What to generate.
    """

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.run_id = config.run_id
        # The window is part of the seed, so runs at different times never reuse event ids.
        self._seed_text = f"{config.seed}:{config.start.isoformat()}:{config.end.isoformat()}"
        self._rng = random.Random(f"icestream:{self._seed_text}")  # noqa: S311 - test data, not security
        self.counts: Counter[str] = Counter()
        self.type_counts: Counter[str] = Counter()
        self._start = config.start.timestamp()
        self._end = config.end.timestamp()
        self._limit = math.inf if config.open_end else self._end  # event times are before this
        self._shares = expected_type_shares()
        self._session_events = mean_session_events()
        # Expected clean events per second at a time (before anomalies).
        self.rate_at = rate_curve(config.rate, self._start, self._end, config.daily_curve)
        self._users = [make_user(self._rng, number) for number in range(config.users)]
        self._malformed_turn = self._rng.randrange(len(MALFORMED_KINDS))
        self.ground_truth: list[Anomaly] = place_anomalies(
            config.anomalies, self._start, self._end, lambda kind, ts: self.rate_at(ts) * self._shares[kind] * 60.0
        )
        self._drops = [
            (parse_ts(a.window_start).timestamp(), parse_ts(a.window_end).timestamp(), a.event_type, a.factor)
            for a in self.ground_truth
            if a.kind == "drop"
        ]
        self._density = 1.0  # generated this much denser than the rate, then thinned
        self._dry: list[int] | None = None  # unit sizes, in a dry pass
        dropped: frozenset[int] = frozenset()
        if config.records is not None and not config.open_end:
            rng = random.Random(f"icestream-thinning:{self._seed_text}")  # noqa: S311 - test data, not security
            self._density, dropped = thinning_plan(config.records, self._unit_sizes, rng)
        self._schedule = Schedule(config.records, dropped, tags=self.counts)
        self._sequence = 0
        self._iterated = False
        self.tables = TableTally(self.run_id, config.new_field_since) if config.second_kind else None

    # -- set-up -------------------------------------------------------------------------------
    def _unit_sizes(self, density: float) -> list[int]:
        """A dry pass at ``density``: each unit's record count (negative: never thinned); nothing encoded."""
        dry = EventGenerator(replace(self.config, records=None))  # the same draws: same seed and window
        dry._density, dry._dry = density, []
        for _ in dry:  # yields nothing: a dry pass only counts
            pass
        return dry._dry

    # -- events -------------------------------------------------------------------------------
    def _event(self, user: User, session_id: str, event_type: str, ts: float, gap: float) -> dict[str, Any]:
        properties = event_properties(self._rng, event_type, gap)
        properties[RUN_ID_PROPERTY] = self.run_id
        return {
            "event_id": uuid4_text(self._rng.getrandbits(128)),
            "user_id": user.user_id,
            "session_id": session_id,
            "event_type": event_type,
            "event_ts": format_ts(ts),
            "properties": properties,
            "device_info": user.device,
        }

    def _unit(
        self, event_ts: float, records: list[Record], tag: str | None = None, fixed: bool = False, now: bool = True
    ) -> Record | None:
        """Add a unit (see :meth:`Schedule.add`); ``fixed``: never thinned; return a record that leaves at once."""
        if self._dry is not None:  # a dry pass only counts each unit's records
            self._dry.append(-len(records) if fixed else len(records))
            return None
        numbered = []
        for record in records:
            self._sequence += 1  # creation order breaks ties between equal send times
            numbered.append((self._sequence, record))
        return self._schedule.add(event_ts, numbered, tag, now=now)

    def _dropped(self, event_type: str, ts: float) -> bool:
        for start, end, dropped_type, keep in self._drops:
            if dropped_type == event_type and start <= ts < end and self._rng.random() >= keep:
                self._unit(ts, [], "anomaly_dropped")
                return True
        return False

    def _emit(self, event: dict[str, Any], ts: float, tag: str | None = None) -> Record | None:
        """Add one clean event, and the duplicates, lateness, extras and bad records drawn for it."""
        config, rng = self.config, self._rng
        extra = rng.random() < config.extra_field_rate
        if extra:
            name, value = extra_field(rng)
            event[name] = value
        # A late event is still sent within the window, so a live run ends on time.
        room = self._end - ts
        late = rng.random() < config.late_rate and room > config.late_seconds[0]
        send_at = ts + rng.uniform(config.late_seconds[0], min(config.late_seconds[1], room)) if late else ts
        data = encode_event(event) if self._dry is None else b""
        key, event_type, event_id = event["user_id"], event["event_type"], event["event_id"]
        unit = [Record(data, key, "event", ts, send_at, event_type, event_id, late, extra)]
        if rng.random() < config.duplicate_rate:
            # A retrying producer resends the same bytes shortly after.
            unit.append(Record(data, key, "duplicate", ts, send_at + rng.uniform(0.05, 2.0), event_type, event_id))
        if config.bad_rate and rng.random() < config.bad_rate:
            kind = config.malformed_kinds[self._malformed_turn % len(config.malformed_kinds)]
            self._malformed_turn += 1
            bad = malformed_payload(kind, event, max_event_bytes=config.max_event_bytes) if self._dry is None else b""
            bad_key = key if kind not in ("missing_user_id", "wrong_type_string") else f"k-{rng.getrandbits(32):08x}"
            unit.append(Record(bad, bad_key, kind, ts, send_at + rng.uniform(0.0, 1.0), event_type, event_id))
        return self._unit(ts, unit, tag, now=tag is None)  # anomaly extras are made ahead of their time

    def _anomaly_extras(self) -> None:
        """Add the extra events of spikes and bursts: a Poisson stream at (factor - 1) x baseline."""
        rng = self._rng
        for anomaly in self.ground_truth:
            if anomaly.kind == "drop":
                continue
            start, end = parse_ts(anomaly.window_start).timestamp(), parse_ts(anomaly.window_end).timestamp()
            extra_per_second = (anomaly.factor - 1.0) * anomaly.baseline_per_minute / 60.0 * self._density
            ts = start + rng.expovariate(extra_per_second)
            while ts < end:
                user = rng.choice(self._users)
                event = self._event(user, f"s-{rng.getrandbits(48):012x}", anomaly.event_type, ts, 1.0)
                self._emit(event, ts, "anomaly_extra")
                ts += rng.expovariate(extra_per_second)

    def _oversized_for_kinesis(self) -> None:
        count = self.config.kinesis_oversized
        for index in range(count):
            ts = self._start + (self._end - self._start) * (index + 1) / (count + 1)
            user = self._rng.choice(self._users)
            event = self._event(user, f"s-{self._rng.getrandbits(48):012x}", "page_view", ts, 1.0)
            data = malformed_payload(KINESIS_OVERSIZED, event) if self._dry is None else b""
            record = Record(data, user.user_id, KINESIS_OVERSIZED, ts, ts, "page_view", event["event_id"])
            self._unit(ts, [record], fixed=True, now=False)

    def _session_rate(self, epoch_seconds: float) -> float:
        return self.rate_at(max(epoch_seconds, self._start)) * self._density / self._session_events

    def _yield(self, record: Record) -> Record:
        self.counts[record.kind] += 1
        if record.kind == "event":
            self.type_counts[record.event_type or ""] += 1
            self.counts["late"] += record.late
            self.counts["extra_fields"] += record.extra_fields
        if self.tables is not None:
            self.tables.add(record)
        return record

    def __iter__(self) -> Iterator[Record]:
        if self._iterated:
            raise RuntimeError("An EventGenerator is iterated once; make a new one for another pass.")
        self._iterated = True
        records, config = self._user_records(), self.config
        if config.second_kind and self._dry is None:
            orders = order_records(self._seed_text, self._start, self._limit, config.order_rate, config.users)
            records = mix_second_kind(
                records,
                orders if config.order_rate else None,
                config.new_field_since,
                lambda: self.window_end.timestamp(),
            )
        for record in records:
            yield self._yield(record)

    def _user_records(self) -> Iterator[Record]:
        schedule = self._schedule
        self._anomaly_extras()  # made ahead, they wait in the schedule for their time
        self._oversized_for_kinesis()
        for ts, user, session_id, event_type, gap in session_events(
            self._rng, self._users, self._start, self._limit, self._session_rate
        ):
            # Every unit still to come happens at or after ``ts``: what happened before can leave.
            if schedule.waiting(before=ts):
                schedule.admit(before=ts)
                if schedule.full:
                    break  # what is still due leaves at the instant the budget was spent (drain)
                yield from schedule.release(before=ts)
            if self._dropped(event_type, ts):
                continue
            ready = self._emit(self._event(user, session_id, event_type, ts, gap), ts)
            if ready is not None:
                yield ready
            if schedule.full:
                break
        yield from schedule.drain()

    @property
    def window_end(self) -> datetime:
        """Event times are before this: the configured end, or where an open window's records ran out."""
        stopped = self._schedule.stopped_at
        if not self.config.open_end or stopped is None:
            return self.config.end
        return datetime.fromtimestamp(math.floor(stopped * 1000 + 1) / 1000, UTC)

    def summary(self) -> dict[str, Any]:
        """Counts of what was yielded, for a JSON summary: ``run_id``, ``records`` (all yielded), ``events``,
        ``malformed``, ``counts`` by kind and flag, the same apart as ``kinds`` and ``flags``, ``type_counts``."""
        kinds, flags = kinds_and_flags(self.counts)
        return {
            "run_id": self.run_id,
            "records": sum(kinds.values()),
            "events": self.counts["event"],
            "malformed": sum(self.counts[kind] for kind in MALFORMED_KINDS),
            "counts": dict(sorted(self.counts.items())),
            "kinds": kinds,
            "flags": flags,
            "type_counts": dict(sorted(self.type_counts.items())),
        }


def generate(config: GeneratorConfig) -> tuple[list[Record], EventGenerator]:
    """Generate every record of ``config`` at once (for backfills and tests).

    Returns:
        The records in send order, and the generator (its ``counts`` and ``ground_truth``).
    """
    generator = EventGenerator(config)
    return list(generator), generator
