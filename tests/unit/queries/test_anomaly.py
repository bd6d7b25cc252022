"""The detector's pure parts: the window grid, the baseline, the flags and the scoring against truth."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from icestream.demos.anomaly_evaluation import evaluate, label_windows
from icestream.errors import ConfigError
from icestream.queries.anomaly import (
    HIGH,
    LOW,
    DetectorOptions,
    complete_windows,
    event_window_counts,
    flagged_intervals,
    score_windows,
)
from icestream.synthetic.ground_truth import Anomaly
from icestream.synthetic.wire import format_ts

START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
OPTIONS = DetectorOptions()


def windows_from_minutes(per_minute: dict[str, np.ndarray], options: DetectorOptions = OPTIONS) -> pd.DataFrame:
    """Counts per sliding window, built from counts per minute the way Spark's window() groups them."""
    rows = []
    for event_type, minutes in per_minute.items():
        for first in range(0, len(minutes) - options.window_minutes + 1, options.slide_minutes):
            rows.append(
                {
                    "window_start": pd.Timestamp(START + timedelta(minutes=first)),
                    "event_type": event_type,
                    "count": int(minutes[first : first + options.window_minutes].sum()),
                }
            )
    end = START + timedelta(minutes=len(next(iter(per_minute.values()))))
    return complete_windows(pd.DataFrame(rows), START, end, options)


def truth(kind: str, event_type: str, start_minute: int, minutes: int = 15) -> Anomaly:
    start = START + timedelta(minutes=start_minute)
    return Anomaly(
        kind,
        event_type,
        format_ts(start.timestamp()),
        format_ts((start + timedelta(minutes=minutes)).timestamp()),
        4,
        1,
    )


def poisson_minutes(rate: float, minutes: int = 180, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).poisson(rate, minutes)


def test_complete_windows_fills_zeros_and_keeps_whole_windows_only() -> None:
    counts = pd.DataFrame(
        {
            "window_start": [pd.Timestamp(START - timedelta(minutes=2)), pd.Timestamp(START)],
            "event_type": ["click", "click"],
            "count": [7, 3],
        }
    )
    end = START + timedelta(minutes=10)
    full = complete_windows(counts, START, end, OPTIONS)
    # Windows start every minute from START while they end by `end`: 6 of them, none cut by an edge.
    assert list(full["window_start"]) == list(pd.date_range(START, periods=6, freq="1min"))
    assert list(full["count"]) == [3, 0, 0, 0, 0, 0]
    assert (full["window_end"] - full["window_start"] == pd.Timedelta(minutes=5)).all()
    assert full["rate_per_minute"].iloc[0] == pytest.approx(0.6)


def test_clean_poisson_traffic_is_not_flagged() -> None:
    per_minute = {"page_view": poisson_minutes(70, seed=1), "logout": poisson_minutes(0.8, seed=2)}
    scored = score_windows(windows_from_minutes(per_minute))
    assert (scored["flag"] == "").all()
    # The first windows have too little history to be judged.
    first = scored[scored["event_type"] == "page_view"].iloc[0]
    assert pd.isna(first["baseline"])


def test_spike_and_drop_are_flagged_in_the_right_direction() -> None:
    search = poisson_minutes(20, seed=3)
    search[60:75] = np.random.default_rng(4).poisson(80, 15)
    cart = poisson_minutes(10, seed=5)
    cart[120:135] = np.random.default_rng(6).poisson(1, 15)
    scored = score_windows(windows_from_minutes({"search": search, "add_to_cart": cart}))
    flagged = scored[scored["flag"] != ""]
    assert set(flagged.loc[flagged["event_type"] == "search", "flag"]) == {HIGH}
    assert set(flagged.loc[flagged["event_type"] == "add_to_cart", "flag"]) == {LOW}
    result = evaluate(scored, [truth("spike", "search", 60), truth("drop", "add_to_cart", 120)])
    assert result.recall == 1.0
    assert result.precision == 1.0
    assert result.false_positive_windows == 0


def test_an_anomaly_never_raises_its_own_baseline() -> None:
    search = np.full(180, 20)
    search[60:75] = 80
    scored = score_windows(windows_from_minutes({"search": search}))
    during = scored[scored["window_start"] >= pd.Timestamp(START + timedelta(minutes=60))]
    # The baseline skips the windows that overlap the scored one, so a steady count stays the median.
    assert (during["baseline"].head(15) == 100).all()


def test_rare_type_with_a_few_extra_events_stays_quiet() -> None:
    logout = np.full(180, 0)
    logout[::2] = 1  # 2-3 events per window
    logout[90:95] = 2  # a window of 10: five times the baseline, still too few events to page anyone
    scored = score_windows(windows_from_minutes({"logout": logout}))
    assert (scored["flag"] == "").all()


def test_a_drop_to_a_tenth_is_flagged_where_sessions_spread_the_counts() -> None:
    # Sessions bring carts in clumps: the windows' counts spread far more than Poisson's. On raw counts
    # even zero carts was under 4 noise scales below such a baseline (the drop went unseen).
    rng = np.random.default_rng(8)
    cart = rng.poisson(rng.gamma(shape=2.0, scale=5.5, size=180))  # about 11 a minute
    cart[120:135] = rng.poisson(1.1, 15)
    scored = score_windows(windows_from_minutes({"add_to_cart": cart}))
    result = evaluate(scored, [truth("drop", "add_to_cart", 120)])
    assert result.recall == 1.0
    assert result.false_positive_windows == 0


def test_the_first_hour_is_judged_by_the_spread_of_the_windows_it_has() -> None:
    # Before a full hour of history the look-back still holds gaps; the spread must come from the
    # windows there are, not fall back to Poisson's (which let clumps of one session page someone).
    rng = np.random.default_rng(9)
    clumpy = rng.poisson(rng.gamma(shape=2.0, scale=10.0, size=180))
    scored = score_windows(windows_from_minutes({"share": clumpy}))
    judged = scored[scored["baseline"].notna()]
    assert judged["mad"].notna().all()
    assert (judged["noise"] > 1.0).any()


def test_a_type_whose_baseline_is_below_min_count_is_never_low() -> None:
    error = np.tile([4, 4, 4, 4, 3], 36)  # 19 a window: below min_count (20), too few to judge a drop by
    error[100:115] = 0
    scored = score_windows(windows_from_minutes({"error": error}))
    assert (scored["flag"] != LOW).all()
    busy = score_windows(windows_from_minutes({"error": error * 3}))  # 57 a window: judged
    assert (busy["flag"] == LOW).any()


def test_event_window_counts_puts_each_event_in_every_window_that_holds_it() -> None:
    events = pd.DataFrame(
        {
            "event_ts": [START + timedelta(minutes=7, seconds=30), START + timedelta(minutes=9)],
            "event_type": ["search", "search"],
        }
    )
    counts = event_window_counts(events, START, START + timedelta(minutes=20)).set_index("window_start")["count"]
    at = {minute: int(counts[pd.Timestamp(START + timedelta(minutes=minute))]) for minute in range(16)}
    # 07:30 is in the windows starting at minutes 3..7, 09:00 in those starting at 5..9.
    assert at == {m: (3 <= m <= 7) + (5 <= m <= 9) for m in range(16)}
    epoch = events.assign(event_ts=[moment.timestamp() for moment in events["event_ts"]])
    assert event_window_counts(epoch, START, START + timedelta(minutes=20)).equals(
        event_window_counts(events, START, START + timedelta(minutes=20))
    )


def notebook_01_backfill(end: datetime, seed: int = 7) -> tuple[pd.DataFrame, list[Anomaly]]:
    """Notebook 01's default backfill ending at ``end``, counted per window; and its ground truth."""
    from icestream.synthetic.generator import backfill_config, generate
    from icestream.synthetic.ground_truth import DEFAULT_ANOMALIES

    config = backfill_config(
        hours=3.0, records=30_000, end=end, seed=seed, anomalies=DEFAULT_ANOMALIES, kinesis_oversized=2
    )
    records, generator = generate(config)
    events = pd.DataFrame(
        [(record.event_ts, record.event_type) for record in records if record.kind == "event"],
        columns=["event_ts", "event_type"],
    )
    return event_window_counts(events, config.start, config.end), generator.ground_truth


def assert_notebook_05s_check(counts: pd.DataFrame, ground_truth: list[Anomaly]) -> None:
    """Notebook 08's assertion at its defaults: every anomaly found, at most one false alarm per hour."""
    scored = score_windows(counts)
    result = evaluate(scored, ground_truth)
    assert result.anomalies == len(ground_truth)
    assert result.recall == 1.0, label_windows(scored, ground_truth)
    assert result.false_positives_per_hour <= 1.0, label_windows(scored, ground_truth)


@pytest.mark.slow
@pytest.mark.parametrize("hour", range(1, 24, 2))
def test_notebook_05s_check_holds_whatever_the_hour_notebook_01_ran(hour: int) -> None:
    """Notebook 01's default backfill ends at "now" on a daily traffic curve: notebook 08 asserts
    recall 1.0 and at most one false alarm per hour at its defaults, at any hour (CI ran it at 02:40
    and it failed; ``bench/bench_anomaly.py`` sweeps every ten minutes of a day for four seeds)."""
    assert_notebook_05s_check(*notebook_01_backfill(datetime(2026, 11, 24, hour, 10, tzinfo=UTC)))


def test_the_cart_drop_of_the_backfill_ending_at_15_30_11_is_found() -> None:
    # The hour before this drop swung between about 45 and 75 carts a window: the MAD of those levels
    # made the noise 2.1 (Poisson's is 1, the sessions' about 1.2) and the drop reached only z = -4.2.
    counts, ground_truth = notebook_01_backfill(datetime(2026, 11, 25, 15, 30, 11, tzinfo=UTC))
    assert_notebook_05s_check(counts, ground_truth)
    scored = score_windows(counts)
    drop = next(anomaly for anomaly in ground_truth if anomaly.kind == "drop")
    inside = scored[
        (scored["event_type"] == drop.event_type)
        & (scored["window_start"] >= pd.Timestamp(drop.start))
        & (scored["window_end"] <= pd.Timestamp(drop.end))
    ]
    assert inside["z"].min() < -5.0


@pytest.mark.parametrize(
    ("end", "seed"),
    [
        (datetime(2026, 11, 25, 2, 47, 29, tzinfo=UTC), 11),
        (datetime(2026, 11, 25, 8, 13, 41, tzinfo=UTC), 3),
        (datetime(2026, 11, 25, 11, 58, 53, tzinfo=UTC), 21),
        (datetime(2026, 11, 25, 17, 4, 37, tzinfo=UTC), 7),
        (datetime(2026, 11, 25, 21, 38, 19, tzinfo=UTC), 11),
    ],
    ids=lambda value: value.strftime("%H%M%S") if isinstance(value, datetime) else f"seed{value}",
)
def test_notebook_05s_check_holds_at_ends_with_seconds(end: datetime, seed: int) -> None:
    """01's backfill ends at "now" to the second: a few such ends across the day, several seeds (the
    sweep over a whole day is ``bench/bench_anomaly.py``)."""
    assert_notebook_05s_check(*notebook_01_backfill(end, seed))


def test_a_slow_swing_of_the_level_is_not_counted_as_noise() -> None:
    # Carts swing ±25 % over an hour (as sessions swell and ebb): the levels of the baseline hour spread
    # wide, but windows five minutes apart hardly differ but for Poisson noise, so the noise stays near 1
    # and a drop to a tenth stands out. From the levels' MAD it read 3.2 and the drop went unseen.
    rng = np.random.default_rng(3)
    cart = rng.poisson(12 * (1 + 0.25 * np.sin(2 * np.pi * np.arange(180) / 60)))
    cart[120:135] = rng.poisson(1.2, 15)
    scored = score_windows(windows_from_minutes({"add_to_cart": cart}))
    result = evaluate(scored, [truth("drop", "add_to_cart", 120)])
    assert result.recall == 1.0
    assert result.false_positive_windows == 0
    at_drop = scored[scored["window_start"] == pd.Timestamp(START + timedelta(minutes=120))]
    assert at_drop["noise"].iloc[0] < 1.5


def test_scoring_rules_type_overlap_and_direction() -> None:
    scored = pd.DataFrame(
        {
            "window_start": pd.to_datetime([START + timedelta(minutes=m) for m in (10, 30, 30, 90)]),
            "event_type": ["search", "search", "error", "search"],
            "flag": [HIGH, LOW, HIGH, HIGH],
            "baseline": [1.0, 1.0, 1.0, 1.0],
            "z": [9.0, -9.0, 9.0, 9.0],
        }
    )
    scored["window_end"] = scored["window_start"] + pd.Timedelta(minutes=5)
    anomalies = [truth("spike", "search", 12), truth("burst", "error", 200)]
    labels = label_windows(scored, anomalies)
    # Same type, overlapping, right direction; the LOW window in the spike is wrong-way.
    assert list(labels["matches"]) == ["spike:search", "", "", ""]
    result = evaluate(scored, anomalies)
    assert result.anomalies == 1  # the burst lies outside the scored range
    assert (result.found, result.true_positive_windows, result.false_positive_windows) == (1, 1, 3)
    assert result.precision == pytest.approx(0.25)


def test_flagged_windows_merge_into_intervals() -> None:
    search = np.full(180, 20)
    search[60:75] = 80
    intervals = flagged_intervals(score_windows(windows_from_minutes({"search": search})))
    assert len(intervals) == 1
    only = intervals.iloc[0]
    assert only["flag"] == HIGH
    assert only["start"] <= pd.Timestamp(START + timedelta(minutes=60)) < only["end"]
    assert only["windows"] >= 10


@pytest.mark.parametrize(
    "options",
    [
        DetectorOptions(window_minutes=5, slide_minutes=6),
        DetectorOptions(window_minutes=0),
        DetectorOptions(baseline_windows=10, min_baseline_windows=20),
        DetectorOptions(threshold=0),
        DetectorOptions(baseline_windows=5, min_baseline_windows=5),  # no pair 5 windows apart inside
    ],
)
def test_invalid_options_are_config_errors(options: DetectorOptions) -> None:
    with pytest.raises(ConfigError):
        options.validated()


def test_the_band_is_the_flag_threshold_a_window_leaves_only_when_flagged() -> None:
    minutes = {
        "busy": poisson_minutes(40, seed=3),
        "quiet": poisson_minutes(2, seed=4),
        "cart": poisson_minutes(12, seed=5),
    }
    minutes["busy"][100:115] *= 4  # a spike, a drop, and clean traffic that wiggles
    minutes["cart"][130:145] //= 10
    scored = score_windows(windows_from_minutes(minutes))
    judged = scored[scored["baseline"].notna()]
    assert (judged["flag"] == HIGH).any()
    assert (judged["flag"] == LOW).any()
    above, below = judged["count"] > judged["band_high"], judged["count"] < judged["band_low"]
    assert (judged.loc[above, "flag"] == HIGH).all()
    assert (judged.loc[below, "flag"] == LOW).all()
    inside = judged[~above & ~below]
    # A flag needs to reach the band's edge (>= because the doubling is inclusive): never inside it.
    assert (
        inside["flag"].eq("") | (inside["count"] == inside["band_high"]) | (inside["count"] == inside["band_low"])
    ).all()
    assert scored.loc[scored["baseline"].isna(), ["band_low", "band_high"]].isna().all().all()


def test_window_counts_statement_is_the_window_query_the_notebook_names() -> None:
    from icestream.queries.anomaly import window_counts_statement

    statement = window_counts_statement("lake.ns.events", OPTIONS, run_id="run-1")
    assert "GROUP BY window(event_ts, '5 minutes', '1 minute'), event_type" in statement.sql
    assert "event_ts >= :start AND event_ts < :end" in statement.sql
    assert "run-1" not in statement.sql
    assert statement.args["run_id"] == "run-1"
    assert ":run_id" not in window_counts_statement("lake.ns.events", OPTIONS).sql
