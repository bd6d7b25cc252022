"""Anomaly detection on per-type event rates, in sliding windows over event time, and its scoring.

The method, in three steps:

1. **Count** (Spark): events per ``(window, event_type)`` with ``window(event_ts, '5 minutes',
   '1 minute')`` over a bounded range of event time, so Iceberg prunes the hourly partitions outside
   it. The result is small (windows × types), so it comes back to pandas and missing
   ``(window, type)`` pairs become explicit zeros: a type that vanished is the strongest drop there is.
2. **Baseline** (pandas): for each window, the **median and MAD** of the same type's counts in the
   ``baseline_windows`` windows that end at or before this window starts (no overlap, so an anomaly
   never raises its own baseline). Median and MAD rather than mean and standard deviation because an
   anomaly of 15 minutes fills a quarter of an hour-long baseline: it would drag a mean up and inflate
   a standard deviation until the windows that follow it look normal (masking) or a drop's recovery
   looks like a spike; the median and MAD ignore up to half of the baseline being anomalous. A rolling
   median over a frame is not a Spark window function, and the data is a few thousand rows, so
   pandas is the simpler place for it; it also makes this step a pure, unit-tested function.
3. **Flag**: the noise scale is ``max(1.4826 × MAD, sqrt(baseline))``: counts are at least Poisson
   noisy, so a rare type (``logout``: about three per window) never gets a spread below its Poisson
   noise just because a few windows happened to agree. A window is ``HIGH`` when its count is above
   ``baseline + threshold × noise``, at least ``(1 + min_change) × baseline`` and at least
   ``min_count``; ``LOW`` when it is below ``baseline − threshold × noise`` and at most
   ``baseline / (1 + min_change)``. The z-score alone is not enough: sessions bring several events of
   a type at once, so counts are over-dispersed and a busy type crosses 4 "Poisson sigmas" on harmless
   wiggles; requiring a doubling (or halving) and, for HIGH, 20 events in the window is what keeps
   false alarms below one per hour (measured on eight generated seeds: recall 1.0, at most 0.8 false
   positive windows per hour). Incidents worth a page are that large: the injected ones are ×4 searches,
   ×0.1 carts and ×8 errors.

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

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.producer.run import read_run_summary, run_summary_path
from icestream.synthetic.generator import RUN_ID_PROPERTY
from icestream.synthetic.ground_truth import Anomaly
from icestream.synthetic.wire import parse_ts
from icestream.tables import qualified_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HIGH = "HIGH"
LOW = "LOW"
DIRECTION = {"spike": HIGH, "burst": HIGH, "drop": LOW}
MAD_TO_SIGMA = 1.4826  # MAD × this estimates the standard deviation of normal data


@dataclass(frozen=True)
class DetectorOptions:
    """How windows are built and flagged; the defaults are what notebook 05 and its tests use.

    Attributes:
        window_minutes: Window length in event time.
        slide_minutes: Distance between window starts.
        baseline_windows: Preceding windows (non-overlapping with the scored one) the baseline uses.
        min_baseline_windows: Fewer than this many preceding windows: the window is not scored.
        threshold: How many noise scales a count must be away from the baseline.
        min_change: Relative change a flag also needs (1.0: at least 2× or at most ½ the baseline).
        min_count: A HIGH window needs at least this many events (rare types stay quiet).
    """

    window_minutes: int = 5
    slide_minutes: int = 1
    baseline_windows: int = 60
    min_baseline_windows: int = 20
    threshold: float = 4.0
    min_change: float = 1.0
    min_count: int = 20

    def validated(self) -> DetectorOptions:
        """Return self after checking every field.

        Raises:
            ConfigError: If a value is out of range.
        """
        if not 1 <= self.slide_minutes <= self.window_minutes <= 24 * 60:
            raise ConfigError(
                f"window_minutes {self.window_minutes} and slide_minutes {self.slide_minutes}: "
                "need 1 <= slide <= window <= 1440 (whole minutes)."
            )
        if not 1 <= self.min_baseline_windows <= self.baseline_windows:
            raise ConfigError(
                f"baseline_windows {self.baseline_windows}, min_baseline_windows {self.min_baseline_windows}: "
                "need 1 <= min_baseline_windows <= baseline_windows."
            )
        if not (self.threshold > 0 and self.min_change > 0 and self.min_count >= 0):
            raise ConfigError("threshold and min_change must be > 0 and min_count >= 0.")
        return self

    @property
    def gap_windows(self) -> int:
        """Windows to skip before the baseline so it never overlaps the scored window."""
        return math.ceil(self.window_minutes / self.slide_minutes)


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
        chosen.append(_utc(known))
    if chosen[1] <= chosen[0]:
        raise ConfigError(f"score range {chosen[0]} .. {chosen[1]}: the end must be after the start.")
    run_id, truth = (summary.run_id, summary.anomalies) if summary else (None, ())
    return ScoringScope(chosen[0], chosen[1], run_id, truth)


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ConfigError(f"{moment}: use a timezone-aware datetime (UTC).")
    return moment.astimezone(UTC)


def window_counts(
    spark: SparkSession,
    table: str,
    start: datetime,
    end: datetime,
    options: DetectorOptions = DetectorOptions(),
    run_id: str | None = None,
) -> pd.DataFrame:
    """Count events per sliding window of event time and event type, in Spark.

    Only windows that lie entirely in ``[start, end)`` are returned (a window cut by the range edge
    would look like a drop). Pairs with no events are returned as zeros.

    Args:
        spark: The session.
        table: Qualified name of the events table.
        start: First event time to read (aware datetime).
        end: Event times before this are read.
        options: Window and slide.
        run_id: Count only the events of this production run (``properties["run_id"]``); None: all.

    Returns:
        Columns ``window_start``, ``window_end`` (UTC timestamps), ``event_type``, ``count``,
        ``rate_per_minute``, sorted by type and window.

    Raises:
        ConfigError: If the range or options are invalid.
    """
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    options = options.validated()
    start, end = _utc(start), _utc(end)
    if end - start < timedelta(minutes=options.window_minutes):
        raise ConfigError(f"range {start} .. {end} is shorter than one {options.window_minutes}-minute window.")
    events = spark.table(qualified_name(*table.split("."))).where(
        (F.col("event_ts") >= F.lit(start)) & (F.col("event_ts") < F.lit(end))
    )
    if run_id is not None:
        # A literal value in a Column expression: bound, never spliced into SQL text.
        events = events.where(F.col("properties").getItem(RUN_ID_PROPERTY) == F.lit(run_id))
    windowed = events.groupBy(
        F.window("event_ts", f"{options.window_minutes} minutes", f"{options.slide_minutes} minutes").alias("w"),
        "event_type",
    ).agg(F.count(F.lit(1)).alias("count"))
    counts = windowed.select(
        F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "event_type", "count"
    ).toPandas()
    return complete_windows(counts, start, end, options)


def complete_windows(counts: pd.DataFrame, start: datetime, end: datetime, options: DetectorOptions) -> pd.DataFrame:
    """Put counts on the full grid of windows inside ``[start, end)`` × types, zeros where absent.

    Args:
        counts: Columns ``window_start``, ``event_type``, ``count`` (other columns are ignored).
        start: Range start; the first window starts at the first whole slide at or after it.
        end: Range end; the last window ends at or before it.
        options: Window and slide.

    Returns:
        Columns ``window_start``, ``window_end``, ``event_type``, ``count``, ``rate_per_minute``.
    """
    slide = pd.Timedelta(minutes=options.slide_minutes)
    length = pd.Timedelta(minutes=options.window_minutes)
    # Spark aligns sliding windows to multiples of the slide since the epoch; so does this grid.
    first = pd.Timestamp(_utc(start)).ceil(slide)
    last = pd.Timestamp(_utc(end)) - length
    starts = pd.date_range(first, last, freq=slide) if last >= first else pd.DatetimeIndex([], tz="UTC")
    types = sorted(counts["event_type"].dropna().unique()) if len(counts) else []
    grid = pd.MultiIndex.from_product([types, starts], names=["event_type", "window_start"])
    observed = counts.dropna(subset=["event_type"]).copy()
    observed["window_start"] = pd.to_datetime(observed["window_start"], utc=True)
    full = observed.groupby(["event_type", "window_start"])["count"].sum().reindex(grid, fill_value=0).reset_index()
    full["count"] = full["count"].astype("int64")
    full["window_end"] = full["window_start"] + length
    full["rate_per_minute"] = full["count"] / options.window_minutes
    return full[["window_start", "window_end", "event_type", "count", "rate_per_minute"]]


def _median_absolute_deviation(values: np.ndarray) -> float:
    return float(np.median(np.abs(values - np.median(values))))


def score_windows(
    counts: pd.DataFrame,
    options: DetectorOptions = DetectorOptions(),
) -> pd.DataFrame:
    """Add each window's baseline (median and MAD of preceding windows) and its flag.

    Args:
        counts: Output of :func:`window_counts` (a complete grid, one row per window and type).
        options: Baseline length and flag thresholds.

    Returns:
        ``counts`` with ``baseline``, ``mad``, ``noise``, ``z`` and ``flag`` (``HIGH``, ``LOW`` or
        empty; ``None`` baseline and no flag where fewer than ``min_baseline_windows`` precede).
    """
    options = options.validated()
    parts = []
    for _event_type, group in counts.sort_values(["event_type", "window_start"]).groupby("event_type", sort=True):
        group = group.copy()
        # Shift by the windows that overlap this one, then look back over baseline_windows windows.
        past = group["count"].astype(float).shift(options.gap_windows)
        rolling = past.rolling(options.baseline_windows, min_periods=options.min_baseline_windows)
        group["baseline"] = rolling.median()
        group["mad"] = rolling.apply(_median_absolute_deviation, raw=True)
        parts.append(group)
    scored = pd.concat(parts, ignore_index=True) if parts else counts.assign(baseline=[], mad=[])
    poisson = scored["baseline"].clip(lower=1.0).pow(0.5)
    scored["noise"] = (MAD_TO_SIGMA * scored["mad"]).where(MAD_TO_SIGMA * scored["mad"] > poisson, poisson)
    scored["z"] = (scored["count"] - scored["baseline"]) / scored["noise"]
    high = (
        (scored["z"] > options.threshold)
        & (scored["count"] >= (1 + options.min_change) * scored["baseline"])
        & (scored["count"] >= options.min_count)
    )
    low = (scored["z"] < -options.threshold) & (scored["count"] <= scored["baseline"] / (1 + options.min_change))
    scored["flag"] = ""
    scored.loc[high.fillna(False), "flag"] = HIGH
    scored.loc[low.fillna(False), "flag"] = LOW
    return scored.sort_values(["event_type", "window_start"]).reset_index(drop=True)


def flagged_intervals(scored: pd.DataFrame) -> pd.DataFrame:
    """Merge overlapping or touching flagged windows of one type and direction into intervals.

    Args:
        scored: Output of :func:`score_windows`.

    Returns:
        Columns ``event_type``, ``flag``, ``start``, ``end``, ``windows``, ``peak_z``.
    """
    flagged = scored[scored["flag"] != ""].sort_values(["event_type", "flag", "window_start"])
    rows: list[dict] = []
    for (event_type, flag), group in flagged.groupby(["event_type", "flag"], sort=True):
        current: dict | None = None
        for window in group.itertuples():
            if current is not None and window.window_start <= current["end"]:
                current["end"] = max(current["end"], window.window_end)
                current["windows"] += 1
                current["peak_z"] = max(current["peak_z"], abs(window.z))
                continue
            if current is not None:
                rows.append(current)
            current = {
                "event_type": event_type,
                "flag": flag,
                "start": window.window_start,
                "end": window.window_end,
                "windows": 1,
                "peak_z": abs(window.z),
            }
        if current is not None:
            rows.append(current)
    return pd.DataFrame(rows, columns=["event_type", "flag", "start", "end", "windows", "peak_z"])


def _matches(event_type: str, flag: str, start: pd.Timestamp, end: pd.Timestamp, anomaly: Anomaly) -> bool:
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
