"""Anomaly detection on per-type event rates, in sliding windows over event time.

:mod:`icestream.queries.anomaly.detector` counts and flags windows. Scoring the flags against the
anomalies a generated run injected is the workbook's lesson, :mod:`icestream.demos.anomaly_evaluation`.
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

__all__ = [
    "HIGH",
    "LOW",
    "MAD_TO_SIGMA",
    "DetectorOptions",
    "complete_windows",
    "event_window_counts",
    "flag_windows",
    "flagged_intervals",
    "score_windows",
    "stabilised",
    "window_counts",
    "window_counts_statement",
]
