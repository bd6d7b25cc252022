"""The detector on generated data: every injected anomaly found, at most one false alarm per hour.

Three seeds of notebook 01's default backfill (3 hours, about 30,000 events, a search spike, a cart
drop and an error burst) go into one fresh table through the bulk loader, each seed on its own day
so their windows never mix. Only clean events are loaded there. A second table holds what two runs
of the workbook leave behind (two overlapping backfills and the first run's live burst): scoring the
second run finds its anomalies and nothing of the first run's.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from icestream.config import Settings, load_settings
from icestream.demos.anomaly_evaluation import evaluate, label_windows, scoring_scope
from icestream.file_load.bulk import load_payloads
from icestream.lake.table import setup_tables
from icestream.producer.run import RunSummary, run_summary_path, write_run_summary
from icestream.producer.summary import ProduceSummary
from icestream.queries import anomaly
from icestream.synthetic.generator import EventGenerator, backfill_config, generate, live_config
from icestream.synthetic.ground_truth import DEFAULT_ANOMALIES

SEEDS = (1, 2, 3)
LAST_END = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def generated(spark, settings: Settings) -> tuple[str, list]:
    """A table holding three seeds' backfills; yields its name and (config, ground truth) per seed."""
    table_settings = load_settings(table=f"a_{uuid.uuid4().hex[:10]}")
    setup_tables(spark, table_settings)
    runs = []
    for day, seed in enumerate(SEEDS):
        config = backfill_config(
            hours=3.0, count=30_000, end=LAST_END - timedelta(days=day), seed=seed, anomalies=DEFAULT_ANOMALIES
        )
        records, generator = generate(config)
        load_payloads(
            spark, table_settings.table_name, ((r.data, r.partition_key) for r in records if r.kind == "event")
        )
        runs.append((config, generator.ground_truth))
    return table_settings.table_name, runs


@pytest.mark.parametrize("index", range(len(SEEDS)), ids=[f"seed{seed}" for seed in SEEDS])
def test_default_detector_finds_every_anomaly_with_few_false_alarms(spark, generated, index: int) -> None:
    table, runs = generated
    config, truth = runs[index]
    scored = anomaly.score_windows(anomaly.window_counts(spark, table, config.start, config.end))
    result = evaluate(scored, truth)
    assert result.anomalies == len(DEFAULT_ANOMALIES)
    assert result.recall == 1.0, label_windows(scored, truth)
    assert result.false_positives_per_hour <= 1.0, label_windows(scored, truth)
    assert result.scored_hours > 2.0


def test_window_counts_match_the_table(spark, generated) -> None:
    table, runs = generated
    config, _ = runs[0]
    options = anomaly.DetectorOptions(window_minutes=10, slide_minutes=5)
    counts = anomaly.window_counts(spark, table, config.start, config.end, options)
    first = counts["window_start"].min()
    expected = spark.sql(
        f"SELECT event_type, count(*) AS n FROM {table} "
        f"WHERE event_ts >= TIMESTAMP '{first:%Y-%m-%d %H:%M:%S}' "
        f"AND event_ts < TIMESTAMP '{first + timedelta(minutes=10):%Y-%m-%d %H:%M:%S}' GROUP BY event_type"
    ).toPandas()
    got = counts[counts["window_start"] == first].set_index("event_type")["count"]
    assert got.to_dict() == {row.event_type: row.n for row in expected.itertuples()}
    # A complete grid: every type in every window, windows every 5 minutes, none cut by the range.
    assert counts.groupby("event_type").size().nunique() == 1
    assert counts["window_start"].min() >= config.start
    assert counts["window_end"].max() <= config.end


RERUN_END = datetime(2026, 11, 17, 12, 0, tzinfo=UTC)  # the second run's backfill ends here
FIRST_END = RERUN_END - timedelta(minutes=50)  # the first run's, then its live burst at 35x the rate


def backfill_summary(generator: EventGenerator, settings: Settings) -> RunSummary:
    """Write the run summary notebook 01 leaves after a backfill (no Kinesis needed here)."""
    config = generator.config
    summary = RunSummary(mode="backfill", stream=settings.stream_name, finished_at=0.0, producer=ProduceSummary(),
                         run_id=generator.run_id, seed=config.seed, window_start=config.start,
                         window_end=generator.window_end, anomalies=tuple(generator.ground_truth))  # fmt: skip
    write_run_summary(summary, run_summary_path(settings, "backfill"))
    return summary


@pytest.fixture(scope="module")
def two_runs(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, list[EventGenerator]]:
    """One table after two runs of the workbook: backfill, live burst, then a backfill over the same hours."""
    settings = load_settings(table=f"r_{uuid.uuid4().hex[:10]}", run_dir=str(tmp_path_factory.mktemp("runs")))
    setup_tables(spark, settings)
    configs = [
        backfill_config(hours=3.0, records=30_000, end=FIRST_END, seed=7, anomalies=DEFAULT_ANOMALIES),
        live_config(100.0, seconds=300.0, start=FIRST_END, seed=8),
        backfill_config(hours=3.0, records=30_000, end=RERUN_END, seed=7, anomalies=DEFAULT_ANOMALIES),
    ]
    generators = []
    for config in configs:
        records, generator = generate(config)
        load_payloads(spark, settings.table_name, ((r.data, r.partition_key) for r in records))  # every kind
        if not config.open_end and config.seconds > 3600:
            backfill_summary(generator, settings)  # the last one written is the second run's
        generators.append(generator)
    return settings, generators


def test_scoring_a_run_ignores_the_other_runs_in_the_table(spark, two_runs) -> None:
    settings, (_, burst, second) = two_runs
    scope = scoring_scope(settings)
    assert (scope.run_id, scope.start, scope.end) == (second.run_id, second.config.start, second.config.end)
    assert list(scope.truth) == second.ground_truth
    scored = anomaly.score_windows(
        anomaly.window_counts(spark, settings.table_name, scope.start, scope.end, run_id=scope.run_id)
    )
    result = evaluate(scored, scope.truth)
    assert result.recall == 1.0, label_windows(scored, scope.truth)
    assert result.false_positives_per_hour <= 1.0, label_windows(scored, scope.truth)
    false_alarms = label_windows(scored, scope.truth).query("matches == ''")
    burst_start, burst_end = pd.Timestamp(burst.config.start), pd.Timestamp(burst.config.end)
    assert not ((false_alarms["window_end"] > burst_start) & (false_alarms["window_start"] < burst_end)).any()

    # The same range without the run's id: the first run's history and its burst are counted too.
    everything = anomaly.score_windows(anomaly.window_counts(spark, settings.table_name, scope.start, scope.end))
    mixed = label_windows(everything, scope.truth).query("matches == ''")
    in_burst = (mixed["window_end"] > burst_start) & (mixed["window_start"] < burst_end)
    assert (mixed.loc[in_burst, "flag"] == anomaly.HIGH).sum() > 10, "what a second `make run` tripped on"


def test_run_counts_hold_only_that_runs_events(spark, two_runs) -> None:
    settings, (first, _, second) = two_runs
    start = second.config.start + timedelta(minutes=30)  # inside both backfills
    options = anomaly.DetectorOptions(window_minutes=10, slide_minutes=10)
    counts = anomaly.window_counts(spark, settings.table_name, start, start + timedelta(minutes=10), options,
                                   run_id=second.run_id)  # fmt: skip
    expected = spark.sql(
        f"SELECT count(*) AS n FROM {settings.table_name} WHERE properties['run_id'] = :run "
        "AND event_ts >= :start AND event_ts < :end",
        args={"run": second.run_id, "start": start, "end": start + timedelta(minutes=10)},
    ).first()
    assert int(counts["count"].sum()) == expected["n"] > 0
    assert first.run_id != second.run_id
