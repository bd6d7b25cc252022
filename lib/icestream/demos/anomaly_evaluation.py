"""Which run to score, and how the detector's flags compare with the anomalies that run injected.

Only one production run at one traffic level should be scored: after notebook 01's backfill, the
live producer sends about 35 times the rate, and every type would "spike" there; and a table that
has seen several runs of the workbook holds several backfills over overlapping hours. So the detector
scores one run (:func:`scoring_scope`): its event-time range, only the events that carry its id
(``properties["run_id"]``, bound as a value, never formatted into SQL), against its own ground truth.
A detector that must survive level shifts would score each type's share of all traffic instead.

Scoring against the ground truth: a flagged window *matches* an anomaly when it has the same event
type, overlaps it in time and points the right way (``HIGH`` for spike and burst, ``LOW`` for drop).
Recall is the share of anomalies with at least one matching flagged window; precision is the share of
flagged windows that match an anomaly; false positives per hour are the flagged windows that match
none, per hour of scored event time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.producer.run import read_run_summary, run_summary_path
from icestream.queries.anomaly.detector import HIGH, LOW, as_utc
from icestream.synthetic.ground_truth import Anomaly
from icestream.synthetic.wire import parse_ts

DIRECTION = {"spike": HIGH, "burst": HIGH, "drop": LOW}


@dataclass(frozen=True)
class ScoringScope:
    """One production run to score: its event-time range, its id and its ground truth.

    Attributes:
        start: First event time to score (aware UTC).
        end: Event times before this are scored.
        run_id: Only events carrying this id in ``properties["run_id"]`` are counted (None: every event).
        truth: The anomalies that run injected.
    """

    start: datetime
    end: datetime
    run_id: str | None
    truth: tuple[Anomaly, ...]


def scoring_scope(settings: Settings, start: str | None = None, end: str | None = None) -> ScoringScope:
    """The last backfill run, to score: its window (or explicit ISO times), its run id, its ground truth.

    The backfill's run summary (:func:`icestream.producer.run.run_summary_path` with mode ``backfill``)
    is written by notebook 01 and by ``icestream produce --backfill-hours`` alike. A summary written
    before runs had ids gives ``run_id`` None: every event in the range is scored, as then.

    Args:
        settings: Locates the run folder.
        start: ISO-8601 start with a zone (e.g. ``2026-11-21T02:00:00Z``); None = the backfill's start.
        end: ISO-8601 end with a zone; None = the backfill's end.

    Returns:
        The scope, times as aware UTC datetimes.

    Raises:
        ConfigError: If a time cannot be parsed, or is not given and no backfill summary is there.
    """
    summary_path = run_summary_path(settings, "backfill")
    summary = read_run_summary(summary_path)
    window = (summary.window_start, summary.window_end) if summary else (None, None)
    chosen = []
    for label, given, known in (("score_start", start, window[0]), ("score_end", end, window[1])):
        if given:
            try:
                known = parse_ts(given)
            except ValueError:
                raise ConfigError(f"{label}: {given!r} is not an ISO-8601 time with a zone.") from None
        if known is None:
            raise ConfigError(
                f"{label}: not given and {summary_path} holds no backfill window; run 01_produce_events.ipynb "
                "(or `icestream produce --backfill-hours 3`) first, or pass both times, "
                "e.g. -p score_start 2026-11-21T02:00:00Z."
            )
        chosen.append(as_utc(known))
    if chosen[1] <= chosen[0]:
        raise ConfigError(f"score range {chosen[0]} .. {chosen[1]}: the end must be after the start.")
    run_id, truth = (summary.run_id, summary.anomalies) if summary else (None, ())
    return ScoringScope(chosen[0], chosen[1], run_id, truth)


def _matches(event_type: Any, flag: Any, start: Any, end: Any, anomaly: Anomaly) -> bool:
    # The cells of an itertuples() row: pandas types them as any cell value.
    return (
        event_type == anomaly.event_type
        and flag == DIRECTION[anomaly.kind]
        and start < pd.Timestamp(anomaly.end)
        and end > pd.Timestamp(anomaly.start)
    )


@dataclass(frozen=True)
class Evaluation:
    """How well the flags match the ground truth (see the module docstring for the definitions)."""

    anomalies: int
    found: int
    flagged_windows: int
    true_positive_windows: int
    false_positive_windows: int
    scored_hours: float

    @property
    def recall(self) -> float:
        """Share of anomalies with at least one matching flagged window (1.0 when there are none)."""
        return self.found / self.anomalies if self.anomalies else 1.0

    @property
    def precision(self) -> float:
        """Share of flagged windows that match an anomaly (1.0 when nothing was flagged)."""
        return self.true_positive_windows / self.flagged_windows if self.flagged_windows else 1.0

    @property
    def false_positives_per_hour(self) -> float:
        """Flagged windows matching no anomaly, per hour of scored event time."""
        return self.false_positive_windows / self.scored_hours if self.scored_hours else 0.0

    def table(self) -> dict[str, float | int]:
        """The numbers as one row for a pandas table."""
        return {
            "anomalies": self.anomalies,
            "found": self.found,
            "recall": round(self.recall, 3),
            "flagged windows": self.flagged_windows,
            "true positive windows": self.true_positive_windows,
            "false positive windows": self.false_positive_windows,
            "precision": round(self.precision, 3),
            "scored hours": round(self.scored_hours, 2),
            "false positives per hour": round(self.false_positives_per_hour, 2),
        }


def label_windows(scored: pd.DataFrame, truth: Sequence[Anomaly]) -> pd.DataFrame:
    """Mark each flagged window with the anomaly it matches (``matches``: ``kind:event_type`` or empty).

    Args:
        scored: Output of :func:`score_windows`.
        truth: The injected anomalies.

    Returns:
        The flagged windows only, with a ``matches`` column.
    """
    flagged = scored[scored["flag"] != ""].copy()
    flagged["matches"] = [
        next(
            (
                f"{anomaly.kind}:{anomaly.event_type}"
                for anomaly in truth
                if _matches(row.event_type, row.flag, row.window_start, row.window_end, anomaly)
            ),
            "",
        )
        for row in flagged.itertuples()
    ]
    return flagged


def evaluate(scored: pd.DataFrame, truth: Sequence[Anomaly]) -> Evaluation:
    """Score the flags against the ground truth.

    Only anomalies that overlap the scored windows count (one outside the scored range cannot be found).

    Args:
        scored: Output of :func:`score_windows`.
        truth: The injected anomalies.

    Returns:
        Counts, recall, precision and false positives per hour.
    """
    assessed = scored[scored["baseline"].notna()]
    if assessed.empty:
        return Evaluation(0, 0, 0, 0, 0, 0.0)
    first, last = assessed["window_start"].min(), assessed["window_end"].max()
    in_range = [a for a in truth if pd.Timestamp(a.start) < last and pd.Timestamp(a.end) > first]
    labelled = label_windows(assessed, in_range)
    found = sum(
        any(_matches(r.event_type, r.flag, r.window_start, r.window_end, a) for r in labelled.itertuples())
        for a in in_range
    )
    true_positives = int((labelled["matches"] != "").sum())
    slide = assessed.groupby("event_type")["window_start"].diff().dropna().min()
    starts = assessed["window_start"].nunique()
    scored_hours = (starts * slide).total_seconds() / 3600 if pd.notna(slide) else 0.0
    return Evaluation(
        anomalies=len(in_range),
        found=found,
        flagged_windows=len(labelled),
        true_positive_windows=true_positives,
        false_positive_windows=len(labelled) - true_positives,
        scored_hours=scored_hours,
    )
