"""The detector: counts per sliding window of event time and type, a robust baseline, HIGH/LOW flags.

The method, in three steps:

1. **Count** (Spark): events per ``(window, event_type)`` with ``window(event_ts, '5 minutes',
   '1 minute')`` over a bounded range of event time, so Iceberg prunes the hourly partitions outside
   it. The result is small (windows × types), so it comes back to pandas and missing
   ``(window, type)`` pairs become explicit zeros: a type that vanished is the strongest drop there is.
2. **Baseline** (pandas): counts are compared on the scale ``2·√(count + 3/8)`` (Anscombe's), where
   Poisson noise is 1 whatever the rate, so a spike of a busy type and a drop of a quiet one are
   judged alike. For each window, the **median** of the same type's values in the
   ``baseline_windows`` windows that end at or before this window starts (no overlap, so an anomaly
   never raises its own baseline) is the centre. The **noise** is estimated from the differences of
   windows ``gap_windows`` apart (windows that do not overlap each other) among the ``noise_windows``
   windows before it: ``1.4826 × median |x(t) − x(t − gap)| / √2`` (a difference of two independent
   windows spreads √2 times as much as one). Median rather than mean, and medians of differences
   rather than a standard deviation, because an anomaly of 15 minutes fills a quarter of an hour-long
   baseline: it would drag a mean up and inflate a standard deviation until the windows that follow
   it look normal (masking) or a drop's recovery looks like a spike; the median ignores up to half of
   the baseline being anomalous, and an anomaly moves only the differences across its two edges
   (about 18 of the 175 in three hours). A rolling median over a frame is not a Spark window
   function, and the data is a few thousand rows, so pandas is the simpler place for it; it also
   makes this step a pure, unit-tested function.

   Why differences and not the MAD of the levels: the level of a type swings slowly (the daily curve,
   and sessions that swell and ebb over tens of minutes), and the spread of an hour's levels counts
   that swing as noise; the MAD of a sample that sits at two levels even overstates its standard
   deviation, by up to 1.48×. Two windows five minutes apart share almost all of a slow swing, so
   their difference keeps only the noise of the windows. Measured on notebook 01's backfill ending
   2026-11-25 15:30:11 (seed 7): across 24 other seeds at that end, ``add_to_cart``'s windows spread
   1.17 on this scale (sessions widen Poisson's 1), but the hour before the drop swung between about
   45 and 75 carts a window, the levels' MAD gave a noise of 2.09, and the drop (×0.1) peaked at
   ``z = −4.4``, unflagged. From differences the noise there is about 1.3 and the drop reaches −7.7. Why
   a longer look-back for the noise than for the centre (three hours against one): on this scale a
   type's noise is set by its sessions, not its rate, so it hardly changes over hours, while one hour
   holds only about twelve independent windows, too few for a steady estimate. The centre still
   lags the daily curve (the median of the last hour sits about 35 minutes back): clean windows'
   mean ``z`` drifts between −0.5 and +0.55 over the day; a centre extrapolated along the hour's own
   slope would add about 0.6 noise scales of its own, more than it removes, so it is not done.
3. **Flag**: the noise scale is ``max(1.4826 × median |difference| / √2, 1)`` (counts are at least
   Poisson noisy, so a rare type never gets a spread below its Poisson noise just because a few
   windows happened to agree) and ``z`` is the window's distance from the baseline's median in noise
   scales. A window is ``HIGH`` when ``z > threshold``, its count is at least
   ``(1 + min_change) × baseline`` and at least ``min_count``; ``LOW`` when ``z < −threshold``, its
   count is at most ``baseline / (1 + min_change)`` and the baseline is at least ``min_count`` (a
   type that sees ten events a window has windows with two by chance). Not z-scores on raw counts:
   counts spread more the larger they are, and sessions spread them further, so a busy type's MAD
   can be a quarter of its median, and then even a window with *no* events is under four noise
   scales below the baseline. The z-score alone is not enough either: sessions bring several events
   of a type at once, so a busy type crosses 4 "Poisson sigmas" on harmless wiggles; requiring a
   doubling (or halving) is what keeps false alarms rare. Incidents worth a page are that large: the
   injected ones are ×4 searches, ×0.1 carts and ×8 errors.

Measured 2026-11-25 with ``nice -n 10 .venv/bin/python bench/bench_anomaly.py``: notebook 01's default
backfill ending every 20 minutes of 2026-11-25 at hh:10:11, hh:30:11 and hh:50:11, for seeds 7, 11, 3
and 21 (288 runs). Noise from differences, at the default threshold of 4.5: every injected anomaly
found in all 288, at most 0.40 false-positive windows per hour, the weakest anomaly (a cart drop)
peaking at ``|z| = 5.3`` (spike 7.4, burst 7.2); the same at 4.0, and no false positive at 5.0.
Noise from the levels' MAD, as before: the cart drop missed once (seed 7, 15:30:11, ``z = −4.4``),
at most 0.79 false positives per hour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from icestream.errors import ConfigError
from icestream.lake.ddl import qualified_name
from icestream.lake.statement import Statement
from icestream.lake.table import LakeTable
from icestream.synthetic.generator import RUN_ID_PROPERTY

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HIGH = "HIGH"
LOW = "LOW"
MAD_TO_SIGMA = 1.4826  # MAD × this estimates the standard deviation of normal data


@dataclass(frozen=True)
class DetectorOptions:
    """How windows are built and flagged; the defaults are what notebook 08 and its tests use.

    Attributes:
        window_minutes: Window length in event time.
        slide_minutes: Distance between window starts.
        baseline_windows: Preceding windows (non-overlapping with the scored one) whose median is the
            baseline.
        noise_windows: Preceding windows whose differences estimate the noise (``baseline_windows``
            if that is more; longer than the baseline, because on the stabilised scale a type's noise
            changes far more slowly than its level).
        min_baseline_windows: Fewer than this many preceding windows: the window is not scored.
        threshold: How many noise scales a window must be away from the baseline (on the
            ``2·√(count + 3/8)`` scale, where Poisson noise is 1).
        min_change: Relative change a flag also needs (1.0: at least 2× or at most ½ the baseline).
        min_count: A HIGH window needs at least this many events, a LOW one a baseline of this many
            (rare types stay quiet).
    """

    window_minutes: int = 5
    slide_minutes: int = 1
    baseline_windows: int = 60
    noise_windows: int = 180
    min_baseline_windows: int = 20
    threshold: float = 4.5
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
        if not self.baseline_windows > self.gap_windows:
            raise ConfigError(
                f"baseline_windows {self.baseline_windows}: the noise comes from pairs of windows "
                f"{self.gap_windows} apart, so need more than {self.gap_windows} (a longer baseline, or a "
                "shorter window)."
            )
        if not (self.threshold > 0 and self.min_change > 0 and self.min_count >= 0):
            raise ConfigError("threshold and min_change must be > 0 and min_count >= 0.")
        return self

    @property
    def gap_windows(self) -> int:
        """Windows to skip before the baseline so it never overlaps the scored window."""
        return math.ceil(self.window_minutes / self.slide_minutes)


def as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC.

    Raises:
        ConfigError: If it has no time zone.
    """
    if moment.tzinfo is None:
        raise ConfigError(f"{moment}: use a timezone-aware datetime (UTC).")
    return moment.astimezone(UTC)


def _duration(minutes: int) -> str:
    return f"{minutes} minute" if minutes == 1 else f"{minutes} minutes"


def window_counts_statement(
    table: str, options: DetectorOptions = DetectorOptions(), run_id: str | None = None
) -> Statement:
    """The statement :func:`window_counts` runs: events per sliding window and type over ``[:start, :end)``.

    The range and the run id are bound values (``:start``, ``:end``, ``:run_id``); the durations are
    validated whole minutes written into the text, since ``window()`` needs literal durations.

    Args:
        table: Qualified name of the events table (validated).
        options: Window and slide.
        run_id: Count only the events of this production run (``properties['run_id']``); None: all.

    Returns:
        The statement, its ``start`` and ``end`` bound to None (:func:`window_counts` binds them).
    """
    options = options.validated()
    name = qualified_name(*table.split("."))
    window = f"window(event_ts, '{_duration(options.window_minutes)}', '{_duration(options.slide_minutes)}')"
    run_filter = f"\n              AND properties['{RUN_ID_PROPERTY}'] = :run_id" if run_id is not None else ""
    args: dict[str, object] = {"start": None, "end": None} | ({"run_id": run_id} if run_id is not None else {})
    return Statement(
        f"""
        SELECT window.start AS window_start, window.end AS window_end, event_type, count(*) AS count
        FROM {name}
        WHERE event_ts >= :start AND event_ts < :end{run_filter}
        GROUP BY {window}, event_type
        """,
        args,
    )


def window_counts(
    spark: SparkSession,
    table: LakeTable | str,
    start: datetime,
    end: datetime,
    options: DetectorOptions = DetectorOptions(),
    run_id: str | None = None,
) -> pd.DataFrame:
    """Count events per sliding window of event time and event type, in Spark.

    Only windows that lie entirely in ``[start, end)`` are returned (a window cut by the range edge
    would look like a drop). Pairs with no events are returned as zeros. The statement
    (:func:`window_counts_statement`) runs through the table, so ``table.last_statement`` shows it.

    Args:
        spark: The session.
        table: The events table (a :class:`~icestream.lake.LakeTable`, or its qualified name).
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
    options = options.validated()
    start, end = as_utc(start), as_utc(end)
    if end - start < timedelta(minutes=options.window_minutes):
        raise ConfigError(f"range {start} .. {end} is shorter than one {options.window_minutes}-minute window.")
    lake_table = table if isinstance(table, LakeTable) else LakeTable(spark, table)
    statement = window_counts_statement(lake_table.name, options, run_id)
    # The range is bound (Iceberg still prunes the hour partitions outside it); so is the run id.
    bound = Statement(statement.sql, {**statement.args, "start": start, "end": end})
    counts = lake_table.run(bound).toPandas()
    return complete_windows(counts, start, end, options)


def event_window_counts(
    events: pd.DataFrame, start: datetime, end: datetime, options: DetectorOptions = DetectorOptions()
) -> pd.DataFrame:
    """The counts :func:`window_counts` gives, from events in pandas (generated data, without Spark).

    Args:
        events: Columns ``event_ts`` (aware datetimes, or epoch seconds) and ``event_type``.
        start: First event time to count.
        end: Event times before this are counted.
        options: Window and slide.

    Returns:
        The same columns and grid as :func:`window_counts`.
    """
    options = options.validated()
    start, end = as_utc(start), as_utc(end)
    times = events["event_ts"]
    times = (
        pd.to_datetime(times, unit="s", utc=True)
        if pd.api.types.is_numeric_dtype(times)
        else pd.to_datetime(times, utc=True)
    )
    inside = (times >= pd.Timestamp(start)) & (times < pd.Timestamp(end))
    times, types = times[inside], events["event_type"][inside]
    slide = pd.Timedelta(minutes=options.slide_minutes)
    length = pd.Timedelta(minutes=options.window_minutes)
    # Like Spark's window(): every window aligned to the slide that holds the event.
    latest = times.dt.floor(slide)
    parts = []
    for back in range(options.gap_windows):
        window_start = latest - back * slide
        holds = window_start + length > times
        parts.append(pd.DataFrame({"window_start": window_start[holds], "event_type": types[holds]}))
    every = pd.concat(parts, ignore_index=True)  # gap_windows >= 1: never empty
    counts = every.groupby(["window_start", "event_type"]).size().rename("count").reset_index()
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
    first = pd.Timestamp(as_utc(start)).ceil(slide)
    last = pd.Timestamp(as_utc(end)) - length
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


def stabilised(counts: pd.Series) -> pd.Series:
    """Anscombe's transform ``2·√(count + 3/8)``: Poisson counts of any mean get a spread of about 1."""
    return cast("pd.Series", 2.0 * np.sqrt(counts.astype(float) + 3.0 / 8.0))  # a Series in, a Series out


def _counts_at(values: pd.Series) -> pd.Series:
    """The count at a value of the stabilised scale (the inverse of :func:`stabilised`), at least 0."""
    return ((values / 2.0) ** 2 - 3.0 / 8.0).clip(lower=0.0)


def score_windows(
    counts: pd.DataFrame,
    options: DetectorOptions = DetectorOptions(),
) -> pd.DataFrame:
    """Add each window's baseline (median of preceding windows), its noise (from their differences) and flag.

    Args:
        counts: Output of :func:`window_counts` (a complete grid, one row per window and type).
        options: Baseline length and flag thresholds.

    Returns:
        ``counts`` with ``baseline`` (the preceding windows' median count), ``mad`` (the median
        absolute difference of windows ``gap_windows`` apart, over √2: one window's MAD without the
        slow swings) and ``noise`` (``max(1.4826 × mad, 1)``), both on the stabilised scale, ``z``,
        ``band_low`` and ``band_high`` (the flag thresholds as counts: a count above ``band_high`` is
        HIGH, one below ``band_low`` is LOW, one inside is not flagged) and ``flag`` (``HIGH``,
        ``LOW`` or empty; ``None`` baseline and band, and no flag, where fewer than
        ``min_baseline_windows`` precede).
    """
    options = options.validated()
    parts = []
    for _event_type, group in counts.sort_values(["event_type", "window_start"]).groupby("event_type", sort=True):
        group = group.copy()
        # Shift by the windows that overlap this one, then look back over baseline_windows windows.
        past = group["count"].astype(float).shift(options.gap_windows)
        baseline, least = options.baseline_windows, options.min_baseline_windows
        group["baseline"] = past.rolling(baseline, min_periods=least).median()
        stable_past = stabilised(past)
        group["center"] = stable_past.rolling(baseline, min_periods=least).median()
        # Noise from the differences of windows gap_windows apart (never overlapping each other): a
        # difference of two independent windows spreads √2 times one window's noise, and a slow change of
        # level (the daily curve, a swell of sessions) hardly moves it, while it widens the spread of the
        # levels themselves. Rolling medians skip the NaNs of the first windows' look-back.
        steps = stable_past.diff(options.gap_windows).abs()
        first_pairs = max(1, options.min_baseline_windows - options.gap_windows)
        look_back = max(options.noise_windows, options.baseline_windows)
        pairs = steps.rolling(look_back - options.gap_windows, min_periods=first_pairs)
        group["mad"] = pairs.median() / math.sqrt(2.0)
        parts.append(group)
    if not parts:
        return counts.assign(baseline=[], mad=[], noise=[], z=[], band_low=[], band_high=[], flag=[])
    scored = pd.concat(parts, ignore_index=True)
    # Where the baseline holds no pair yet (min_baseline_windows <= gap_windows), Poisson's noise.
    noise = (MAD_TO_SIGMA * scored["mad"]).clip(lower=1.0)
    scored["noise"] = noise.where(scored["mad"].notna() | scored["baseline"].isna(), 1.0)
    return flag_windows(scored, options)


def flag_windows(scored: pd.DataFrame, options: DetectorOptions = DetectorOptions()) -> pd.DataFrame:
    """The flag rules (step 3 of the module docstring), given each window's baseline, centre and noise.

    Args:
        scored: Window counts with ``baseline`` (median count), ``center`` (median on the stabilised
            scale) and ``noise`` (on that scale, at least 1).
        options: Threshold, ``min_change`` and ``min_count``.

    Returns:
        ``scored`` with ``z``, ``band_low``, ``band_high`` and ``flag``, without ``center``, sorted by
        type and window.
    """
    options = options.validated()
    scored = scored.copy()
    scored["z"] = (stabilised(scored["count"]) - scored["center"]) / scored["noise"]
    # The band is where a window stays unflagged: every condition of a flag, mapped back to counts.
    # Above band_high (the largest of the z threshold, the doubling and min_count) a window is HIGH;
    # below band_low it is LOW, and where the baseline is under min_count nothing is LOW (band_low 0).
    spread = options.threshold * scored["noise"]
    scored["band_high"] = np.maximum.reduce(
        [
            _counts_at(scored["center"] + spread),
            (1 + options.min_change) * scored["baseline"],
            pd.Series(float(options.min_count), index=scored.index),
        ]
    )
    lowest = cast(
        "pd.Series", np.minimum(_counts_at(scored["center"] - spread), scored["baseline"] / (1 + options.min_change))
    )
    scored["band_low"] = lowest.where(scored["baseline"] >= options.min_count, 0.0)
    scored.loc[scored["baseline"].isna(), ["band_low", "band_high"]] = np.nan
    high = (
        (scored["z"] > options.threshold)
        & (scored["count"] >= (1 + options.min_change) * scored["baseline"])
        & (scored["count"] >= options.min_count)
    )
    low = (
        (scored["z"] < -options.threshold)
        & (scored["count"] <= scored["baseline"] / (1 + options.min_change))
        & (scored["baseline"] >= options.min_count)
    )
    scored["flag"] = ""
    scored.loc[high.fillna(False), "flag"] = HIGH
    scored.loc[low.fillna(False), "flag"] = LOW
    scored = scored.drop(columns="center")
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
                current["peak_z"] = max(current["peak_z"], abs(cast("float", window.z)))
                continue
            if current is not None:
                rows.append(current)
            current = {
                "event_type": event_type,
                "flag": flag,
                "start": window.window_start,
                "end": window.window_end,
                "windows": 1,
                "peak_z": abs(cast("float", window.z)),
            }
        if current is not None:
            rows.append(current)
    return pd.DataFrame(rows, columns=["event_type", "flag", "start", "end", "windows", "peak_z"])
