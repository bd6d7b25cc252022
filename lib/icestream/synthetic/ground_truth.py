"""Anomalies to inject (``spike``, ``drop``, ``burst``) and the ground-truth file of those injected.

The generator turns each :class:`AnomalySpec` into an :class:`Anomaly` with a place in event time;
the ground-truth file, one JSON line per anomaly under the run folder, is what the anomaly detector
is scored against.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.synthetic.model import EVENT_TYPES
from icestream.synthetic.wire import format_ts, parse_ts

ANOMALY_KINDS = ("spike", "drop", "burst")
GROUND_TRUTH_FILE = "anomalies_truth.jsonl"


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


def check_spec(spec: AnomalySpec) -> None:
    """Check an anomaly spec's kind, event type, factor and duration.

    Raises:
        ConfigError: If one of them is out of range.
    """
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


def place_anomalies(
    specs: Sequence[AnomalySpec], start: float, end: float, baseline_per_minute: Callable[[str, float], float]
) -> list[Anomaly]:
    """Place anomalies in a window of event time; without a start, evenly spaced and clear of the edges.

    Args:
        specs: The anomalies to inject.
        start: Window start (epoch seconds).
        end: Window end (epoch seconds).
        baseline_per_minute: Expected events of a type per minute at a time, without anomalies.

    Returns:
        The ground truth, one :class:`Anomaly` per spec.

    Raises:
        ConfigError: If an anomaly does not fit in the window.
    """
    span_minutes = (end - start) / 60.0
    placed = []
    for index, spec in enumerate(specs):
        start_minutes = (
            spec.start_minutes
            if spec.start_minutes is not None
            else span_minutes * (index + 1) / (len(specs) + 1) - spec.duration_minutes / 2
        )
        first = start + start_minutes * 60.0
        if spec.start_minutes is None:
            first = math.floor(first / 60.0) * 60.0  # whole minutes, like the detector's windows
        last = first + spec.duration_minutes * 60.0
        if first < start or last > end:
            raise ConfigError(
                f"anomaly {spec.kind}:{spec.event_type} at {start_minutes:.1f}+{spec.duration_minutes:.1f} min "
                f"does not fit in the {span_minutes:.1f}-minute window; make the window longer or the anomaly shorter."
            )
        baseline = baseline_per_minute(spec.event_type, (first + last) / 2)
        placed.append(
            Anomaly(spec.kind, spec.event_type, format_ts(first), format_ts(last), spec.factor, round(baseline, 3))
        )
    return placed


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
        check_spec(spec)
        specs.append(spec)
    return tuple(specs)


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
