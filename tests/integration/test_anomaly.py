"""The detector on generated data: every injected anomaly found, at most one false alarm per hour.

Three seeds of notebook 01's default backfill (3 hours, about 30,000 events, a search spike, a cart
drop and an error burst) go into one fresh table through the bulk loader, each seed on its own day
so their windows never mix. Only clean events are loaded: the ingest removes duplicates, and the
bulk loader does not.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from icestream import anomaly, tables
from icestream.config import Settings, load_settings
from icestream.ingest.bulk import load_payloads
from icestream.synthetic.generator import backfill_config, generate
from icestream.synthetic.ground_truth import DEFAULT_ANOMALIES

pytestmark = pytest.mark.integration

SEEDS = (1, 2, 3)
LAST_END = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def generated(spark, settings: Settings) -> tuple[str, list]:
    """A table holding three seeds' backfills; yields its name and (config, ground truth) per seed."""
    table_settings = load_settings(table=f"a_{uuid.uuid4().hex[:10]}")
    tables.setup_tables(spark, table_settings)
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
    result = anomaly.evaluate(scored, truth)
    assert result.anomalies == len(DEFAULT_ANOMALIES)
    assert result.recall == 1.0, anomaly.label_windows(scored, truth)
    assert result.false_positives_per_hour <= 1.0, anomaly.label_windows(scored, truth)
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
