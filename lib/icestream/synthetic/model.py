"""The event model: types, the session funnel, properties per type, devices and the daily curve.

Users have sessions of 1..N events whose types follow a funnel (``page_view`` → ``click`` →
``add_to_cart`` → ``purchase``, plus ``search``, ``login``, ``logout``, ``share`` and ``error``),
each with properties that fit its type, and a device that stays with the user. Session starts follow
a smooth daily rate curve, so per-type rates are Poisson noise around a slow curve.

Gaps between a session's events are ``min(300, 0.5 + Exp(mean 15))`` seconds. A window does not
open on an empty site: :func:`session_events` draws, from the stationary state of this process, the
sessions already under way when the window opens (where each is in the funnel and when its next event
comes), so traffic is at its full level from the first second without simulating the past; and each
session draws its next event only when that event's time comes, so the cost is per event sent.

The functions that draw take the generator's ``random.Random``: the order of the draws is part of
what makes a seed reproduce the same records (and the committed samples). The funnel's weighted draws
use precomputed cumulative weights (the same draws as ``rng.choices``, without its per-call lists).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

EVENT_TYPES = ("page_view", "click", "search", "add_to_cart", "purchase", "login", "logout", "share", "error")

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
_GAP_FLOOR, _GAP_MEAN_ABOVE_FLOOR, _GAP_CAP = 0.5, 15.0, 300.0  # seconds between a session's events


def _cumulative(weights: dict[str, float]) -> tuple[tuple[str, ...], list[float]]:
    """Population and cumulative weights for :func:`_pick` (what ``rng.choices`` computes per call)."""
    return tuple(weights), list(itertools.accumulate(weights.values()))


def _pick(rng: random.Random, draw: tuple[tuple[str, ...], list[float]]) -> str:
    """``rng.choices(population, cum_weights=cumulative)[0]``: the same draw, without building lists."""
    population, cumulative = draw
    return population[bisect.bisect(cumulative, rng.random() * cumulative[-1], 0, len(cumulative) - 1)]


_FIRST_DRAW = _cumulative(_FIRST)
_NEXT_DRAW = {name: _cumulative(row) for name, row in _NEXT.items()}

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
_QUERIES = (
    "running shoes",
    "rain jacket",
    "usb-c cable",
    "coffee grinder",
    "desk lamp",
    "yoga mat",
    "backpack",
    "headphones",
    "gift card",
    "winter boots",
    "water bottle",
    "phone case",
)
_ERRORS = (
    ("500", "internal server error"),
    ("502", "bad gateway"),
    ("504", "gateway timeout"),
    ("401", "session expired"),
    ("PAY-17", "payment declined"),
    ("JS-1", "script error"),
)
_DEVICES = (  # device_type, weight, (os, weight) pairs, app versions (newest most used)
    ("mobile", 0.55, (("iOS", 0.45), ("Android", 0.55)), ("5.3.1", "5.3.0", "5.2.4", "5.1.0")),
    ("desktop", 0.35, (("Windows", 0.55), ("macOS", 0.35), ("Linux", 0.10)), ("web-2026.11", "web-2026.10")),
    ("tablet", 0.10, (("iPadOS", 0.6), ("Android", 0.4)), ("5.3.1", "5.2.4")),
)
_EXTRA_FIELDS = (("experiment", ("checkout_v2", "control", "search_rank_b")), ("locale", ("en-US", "de-DE", "fr-FR")))


@dataclass
class User:
    """A user and the device that stays with them (``device_info`` on the wire)."""

    user_id: str
    device: dict[str, str]


def make_user(rng: random.Random, number: int) -> User:
    """Draw user ``number``'s device: type, OS and app version (newer versions are more common)."""
    device_type, _, systems, versions = rng.choices(_DEVICES, weights=[entry[1] for entry in _DEVICES])[0]
    os_name = rng.choices([name for name, _ in systems], weights=[weight for _, weight in systems])[0]
    version = rng.choices(versions, weights=range(len(versions), 0, -1))[0]
    return User(f"u-{number:05d}", {"device_type": device_type, "os": os_name, "app_version": version})


def first_event_type(rng: random.Random) -> str:
    """Draw the type of a session's first event."""
    return _pick(rng, _FIRST_DRAW)


def next_event_type(rng: random.Random, event_type: str) -> str | None:
    """Draw the type that follows ``event_type`` in the funnel; None ends the session."""
    following = _pick(rng, _NEXT_DRAW[event_type])
    return None if following == _END else following


def draw_gap(rng: random.Random) -> float:
    """Draw the seconds from one event of a session to the next."""
    return min(_GAP_CAP, _GAP_FLOOR + rng.expovariate(1 / _GAP_MEAN_ABOVE_FLOOR))


def _mean_gap() -> float:
    return _GAP_FLOOR + _GAP_MEAN_ABOVE_FLOOR * -math.expm1(-(_GAP_CAP - _GAP_FLOOR) / _GAP_MEAN_ABOVE_FLOOR)


def _residual_quantile(share: float) -> float:
    """Seconds until the next event of a session caught between two events, at quantile ``share``.

    A gap that covers a given instant is picked with probability proportional to its length, and the
    instant falls uniformly within it, so the time left has density ``P(gap > r) / E[gap]`` (uniform
    over the floor, then the exponential part cut at the cap); this inverts its distribution function.
    """
    covered = share * _mean_gap()
    if covered < _GAP_FLOOR:
        return covered
    return _GAP_FLOOR - _GAP_MEAN_ABOVE_FLOOR * math.log1p(-(covered - _GAP_FLOOR) / _GAP_MEAN_ABOVE_FLOOR)


@functools.cache
def _under_way_draw() -> tuple[tuple[str, ...], list[float]]:
    """Which type a session under way last showed: its expected visits times the chance to go on."""
    visits = _expected_visits()
    return _cumulative({name: visits[name] * (1.0 - _NEXT[name][_END]) for name in EVENT_TYPES})


@functools.cache
def _continuing_draw() -> dict[str, tuple[tuple[str, ...], list[float]]]:
    """The funnel's next-type draw given that the session goes on."""
    return {name: _cumulative({k: v for k, v in _NEXT[name].items() if k != _END}) for name in EVENT_TYPES}


def _under_way_per_session_rate() -> float:
    """Mean sessions under way at an instant, per session started per second (stationary state).

    A session is under way when one of its events lies before the instant and the next one after:
    gaps that go on start at (session rate x sum of visits x chance to go on) per second and last
    ``E[gap]`` on average.
    """
    visits = _expected_visits()
    return _mean_gap() * sum(visits[name] * (1.0 - _NEXT[name][_END]) for name in EVENT_TYPES)


def _resumed_type(rng: random.Random) -> str:
    """Draw the type of the next event of a session under way (from the type it last showed)."""
    return _pick(rng, _continuing_draw()[_pick(rng, _under_way_draw())])


def event_properties(rng: random.Random, event_type: str, gap: float) -> dict[str, str]:
    """Draw the properties of one event (all strings, the keys of :data:`PROPERTY_FIELDS`).

    Args:
        rng: The generator's random source.
        event_type: The event's type.
        gap: Seconds until the session's next event (a page view's ``duration_ms``).

    Returns:
        The properties.
    """
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


def extra_field(rng: random.Random) -> tuple[str, str]:
    """Draw an unknown extra top-level field (name, value), as a newer producer might send."""
    name, values = rng.choice(_EXTRA_FIELDS)
    return name, rng.choice(values)


def daily_rate_factor(epoch_seconds: float) -> float:
    """Relative traffic by time of day: lowest near 03:00 UTC (0.6), highest near 15:00 UTC (1.4)."""
    hour = (epoch_seconds % 86400.0) / 3600.0
    return 1.0 + 0.4 * math.sin(2.0 * math.pi * (hour - 9.0) / 24.0)


def rate_curve(rate: float, start: float, end: float, daily: bool) -> Callable[[float], float]:
    """Clean events per second at a time: ``rate`` throughout, or the daily curve scaled to average ``rate``.

    Args:
        rate: Mean events per second over the window.
        start: Window start (epoch seconds).
        end: Window end (epoch seconds).
        daily: Follow :func:`daily_rate_factor`.

    Returns:
        The rate as a function of epoch seconds.
    """
    if not daily:
        return lambda _: rate
    steps = 100
    width = (end - start) / steps
    mean = sum(daily_rate_factor(start + (step + 0.5) * width) for step in range(steps)) / steps
    return lambda epoch_seconds: rate * daily_rate_factor(epoch_seconds) / mean


@functools.cache
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


def session_events(
    rng: random.Random,
    users: Sequence[User],
    start: float,
    limit: float,
    session_rate: Callable[[float], float],
) -> Iterator[tuple[float, User, str, str, float]]:
    """The events of sessions in event-time order, from ``start`` until ``limit``.

    The window opens with the sessions already under way (drawn from the stationary state), so traffic
    is at its full level from the start; new sessions start as a Poisson process. A session draws each
    event when its time comes, so nothing is drawn ahead of need.

    Args:
        rng: The generator's random source.
        users: The users sessions belong to.
        start: First event time (epoch seconds).
        limit: Event times are before this (``math.inf``: until the caller stops).
        session_rate: Sessions started per second at a time.

    Yields:
        ``(ts, user, session_id, event_type, gap)``, ``gap`` being the seconds to the session's next event.
    """
    sessions: list[tuple[float, int, list[Any]]] = []  # (next event time, tie-break, [user, id, type, left])
    # Sessions under way at ``start`` are a Poisson count whose first events in the window fall at the
    # residual law's quantiles of the unit-rate arrivals below their mean: drawn in time order, as they come.
    under_way = session_rate(start) * _under_way_per_session_rate()
    arrival = rng.expovariate(1.0)
    next_resumed = start + _residual_quantile(arrival / under_way) if arrival < under_way else math.inf
    number, next_start = 0, start + rng.expovariate(session_rate(start))
    while (at := min(sessions[0][0] if sessions else math.inf, next_start, next_resumed)) < limit:
        if sessions and at == sessions[0][0]:
            session = heapq.heappop(sessions)[2]
        elif at == next_start:
            session = [None, None, first_event_type(rng), MAX_SESSION_EVENTS]
            next_start += rng.expovariate(session_rate(next_start))
        else:
            session = [None, None, _resumed_type(rng), MAX_SESSION_EVENTS]
            arrival += rng.expovariate(1.0)
            next_resumed = start + _residual_quantile(arrival / under_way) if arrival < under_way else math.inf
        if session[0] is None:  # drawn at its first event in the window, not ahead of it
            session[:2] = rng.choice(users), f"s-{rng.getrandbits(48):012x}"
        user, session_id, event_type, left = session
        gap = draw_gap(rng)
        yield at, user, session_id, event_type, gap
        following = next_event_type(rng, event_type)
        if following is not None and left > 1:
            session[2:] = following, left - 1
            number += 1
            heapq.heappush(sessions, (at + gap, number, session))
