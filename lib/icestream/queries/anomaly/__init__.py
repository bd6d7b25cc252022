"""Anomaly detection on per-type event rates, in sliding windows over event time, and its scoring.

:mod:`icestream.queries.anomaly.detector` counts and flags windows;
:mod:`icestream.queries.anomaly.evaluation` picks the run to score and compares the flags with its
ground truth. Everything a notebook needs is here.
"""

from icestream.queries.anomaly.detector import (
    HIGH,
    LOW,
    MAD_TO_SIGMA,
    DetectorOptions,
    complete_windows,
    event_window_counts,
    flag_windows,
    flagged_intervals,
    score_windows,
    stabilised,
    window_counts,
    window_counts_statement,
)
from icestream.queries.anomaly.evaluation import (
    DIRECTION,
    Evaluation,
    ScoringScope,
    evaluate,
    label_windows,
    scoring_scope,
)

__all__ = [
    "DIRECTION",
    "HIGH",
    "LOW",
    "MAD_TO_SIGMA",
    "DetectorOptions",
    "Evaluation",
    "ScoringScope",
    "complete_windows",
    "evaluate",
    "event_window_counts",
    "flag_windows",
    "flagged_intervals",
    "label_windows",
    "score_windows",
    "scoring_scope",
    "stabilised",
    "window_counts",
    "window_counts_statement",
]
