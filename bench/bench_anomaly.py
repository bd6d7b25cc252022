"""The anomaly detector's recall and false alarms over the times of day, against its raw-count predecessor.

Notebook 01's default backfill (3 hours, 30,000 records, seed 7, a search spike, a cart drop and an
error burst) ends at "now", and its traffic follows a daily curve, so what notebook 05 scores
depends on the hour it runs. This sweeps the backfill's end over a day (every ``--step-minutes``),
for several seeds, counts the clean events per window in pandas (the same grid as Spark's
``window()``: :func:`icestream.queries.anomaly.event_window_counts`) and scores each run with
:func:`icestream.queries.anomaly.score_windows` at the default options and at neighbouring thresholds (the
margin). The baseline of the same run is the detector as it was before 2026-11-24: z-scores on raw
counts, noise ``max(1.4826 × MAD, √baseline)``, LOW without a minimum baseline (kept below, only here).

An accuracy sweep, not a timing: it is deterministic for given seeds and end times.

Run: ``.venv/bin/python bench/bench_anomaly.py [--seeds 7,11,3,21] [--step-minutes 20]`` (about 7 minutes
for the defaults: generating 30,000 records costs about a second per run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, command_line, write_results

from icestream.queries import anomaly
from icestream.queries.anomaly import HIGH, LOW, MAD_TO_SIGMA, DetectorOptions
from icestream.synthetic.generator import backfill_config, generate
from icestream.synthetic.ground_truth import DEFAULT_ANOMALIES

DAY = datetime(2026, 11, 24, tzinfo=UTC)


def raw_count_detector(counts: pd.DataFrame) -> pd.DataFrame:
    """The detector before 2026-11-24 (z-scores on raw counts), as the baseline of this sweep."""
    options = DetectorOptions(threshold=4.0)  # its default then

    def mad(values: np.ndarray) -> float:
        return float(np.median(np.abs(values - np.median(values))))

    parts = []
    for _, group in counts.sort_values(["event_type", "window_start"]).groupby("event_type", sort=True):
        group = group.copy()
        rolling = (
            group["count"]
            .astype(float)
            .shift(options.gap_windows)
            .rolling(options.baseline_windows, min_periods=options.min_baseline_windows)
        )
        group["baseline"], group["mad"] = rolling.median(), rolling.apply(mad, raw=True)
        parts.append(group)
    scored = pd.concat(parts, ignore_index=True)
    poisson = scored["baseline"].clip(lower=1.0).pow(0.5)
    spread = MAD_TO_SIGMA * scored["mad"]
    scored["noise"] = spread.where(spread > poisson, poisson)
    scored["z"] = (scored["count"] - scored["baseline"]) / scored["noise"]
    doubled = scored["count"] >= (1 + options.min_change) * scored["baseline"]
    high = (scored["z"] > options.threshold) & doubled & (scored["count"] >= options.min_count)
    low = (scored["z"] < -options.threshold) & (scored["count"] <= scored["baseline"] / (1 + options.min_change))
    scored["flag"] = ""
    scored.loc[high.fillna(False), "flag"] = HIGH
    scored.loc[low.fillna(False), "flag"] = LOW
    return scored


def notebook_backfill(end: datetime, seed: int) -> tuple[pd.DataFrame, list, datetime, datetime]:
    """Notebook 01's default backfill ending at ``end``: its clean events, ground truth and window."""
    config = backfill_config(
        hours=3.0, records=30_000, end=end, seed=seed, anomalies=DEFAULT_ANOMALIES, kinesis_oversized=2
    )
    records, generator = generate(config)
    events = pd.DataFrame(
        [(record.event_ts, record.event_type) for record in records if record.kind == "event"],
        columns=["event_ts", "event_type"],
    )
    return events, generator.ground_truth, config.start, config.end


def sweep_row(detector: Callable[[pd.DataFrame], pd.DataFrame], counts: pd.DataFrame, truth: list) -> dict:
    scored = detector(counts)
    evaluation = anomaly.evaluate(scored, truth)
    peaks = {}
    for injected in truth:
        inside = scored[
            (scored["event_type"] == injected.event_type)
            & (scored["window_start"] >= pd.Timestamp(injected.start))
            & (scored["window_end"] <= pd.Timestamp(injected.end))
        ]
        peaks[injected.kind] = float(inside["z"].abs().max())
    return {"recall": evaluation.recall, "fp_per_hour": evaluation.false_positives_per_hour, "peak_z": peaks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="7,11,3,21", help="generator seeds, comma-separated (7: notebook 01's)")
    parser.add_argument("--step-minutes", type=int, default=20, help="distance between the backfills' ends")
    parser.add_argument("--thresholds", default="4.0,4.5,5.0", help="thresholds to score at (4.5: the default)")
    args = parser.parse_args()
    facts = banner("anomaly detector over the times of day", command_line())
    seeds = [int(seed) for seed in args.seeds.split(",")]
    thresholds = [float(value) for value in args.thresholds.split(",")]
    detectors: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
        "raw counts (before), threshold 4.0": raw_count_detector,
        **{
            f"stabilised, threshold {value}": (
                lambda counts, value=value: anomaly.score_windows(counts, DetectorOptions(threshold=value))
            )
            for value in thresholds
        },
    }
    rows: dict[str, list[dict]] = {name: [] for name in detectors}
    ends = [DAY + timedelta(minutes=minute) for minute in range(0, 24 * 60, args.step_minutes)]
    for seed in seeds:
        for end in ends:
            events, truth, start, stop = notebook_backfill(end, seed)
            counts = anomaly.event_window_counts(events, start, stop)
            for name, detector in detectors.items():
                rows[name].append({"seed": seed, "end": end.isoformat(), **sweep_row(detector, counts, truth)})
        print(f"seed {seed}: {len(ends)} backfills scored", flush=True)
    results = {}
    for name, runs in rows.items():
        missed = [run for run in runs if run["recall"] < 1.0]
        noisy = [run for run in runs if run["fp_per_hour"] > 1.0]
        weakest = {kind: min(run["peak_z"][kind] for run in runs) for kind in runs[0]["peak_z"]}
        results[name] = {
            "runs": len(runs),
            "runs_missing_an_anomaly": len(missed),
            "runs_above_one_false_alarm_per_hour": len(noisy),
            "fp_per_hour_median": statistics.median(run["fp_per_hour"] for run in runs),
            "fp_per_hour_max": max(run["fp_per_hour"] for run in runs),
            "weakest_peak_z": weakest,
            "failing_runs": [(run["seed"], run["end"]) for run in missed + noisy],
        }
        weakest_text = ", ".join(f"{kind} {value:.1f}" for kind, value in weakest.items())
        print(
            f"{name:>36}: {len(runs)} runs; missed an anomaly in {len(missed)}, more than 1 false alarm/h in "
            f"{len(noisy)}; false alarms/h median {results[name]['fp_per_hour_median']:.2f}, max "
            f"{results[name]['fp_per_hour_max']:.2f}; weakest peak |z| inside an anomaly: {weakest_text}"
        )
    write_results("anomaly", {"machine": facts, "seeds": seeds, "step_minutes": args.step_minutes, "results": results})


if __name__ == "__main__":
    main()
