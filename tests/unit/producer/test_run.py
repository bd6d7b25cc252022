"""One production run: its typed summary in the run folder, and the range the anomaly detector reads from it."""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from icestream import cli
from icestream.config import Settings, load_settings
from icestream.demos.anomaly_evaluation import scoring_scope
from icestream.errors import ConfigError
from icestream.producer.run import read_run_summary, run_production, run_summary_path
from icestream.synthetic.generator import EventGenerator, backfill_config
from icestream.synthetic.ground_truth import DEFAULT_ANOMALIES, ground_truth_path, read_ground_truth
from tests.helpers.fake_kinesis import AcceptingKinesis

END = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)


@pytest.fixture
def run_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings whose run folder is ``tmp_path`` (exported, as the CLI reads the environment)."""
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path))
    return load_settings()


def test_a_run_writes_a_summary_that_reads_back_the_same(run_settings: Settings) -> None:
    generator = EventGenerator(backfill_config(hours=1, count=400, end=END, seed=4, anomalies=DEFAULT_ANOMALIES))
    client = AcceptingKinesis()
    summary = run_production(run_settings, generator, mode="backfill", generator=generator, client=client,
                             progress=False)  # fmt: skip
    assert summary.producer.sent == summary.generator["records"] == len(client.data)
    assert (summary.window_start, summary.window_end) == (END - timedelta(hours=1), END)
    assert summary.ground_truth == ground_truth_path(run_settings)
    assert list(summary.anomalies) == read_ground_truth(ground_truth_path(run_settings)) == generator.ground_truth
    again = read_run_summary(run_summary_path(run_settings, "backfill"))
    assert again is not None
    assert replace(again, producer=summary.producer) == summary
    assert asdict(again.producer) == asdict(summary.producer) | {"seconds": round(summary.producer.seconds, 3)}


def test_the_cli_backfill_gives_the_anomaly_detector_its_range(
    run_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = AcceptingKinesis()
    monkeypatch.setattr("icestream.kinesis.clients.kinesis_client", lambda settings, **_: client)
    assert cli.main(["produce", "--backfill-hours", "1", "--count", "300", "--seed", "3", "--no-progress"]) == 0
    summary = read_run_summary(run_summary_path(run_settings, "backfill"))
    assert summary is not None
    assert summary.producer.sent == len(client.data) == 300
    scope = scoring_scope(run_settings)
    assert (scope.start, scope.end) == (summary.window_start, summary.window_end)
    assert scope.end - scope.start == timedelta(hours=1)
    assert scope.run_id == summary.run_id == summary.generator["run_id"]
    assert scope.truth == summary.anomalies
    assert [a.kind for a in scope.truth] == ["spike", "drop", "burst"]
    later = scoring_scope(run_settings, end="2030-01-01T00:00:00Z")
    assert (later.start, later.end, later.run_id) == (scope.start, datetime(2030, 1, 1, tzinfo=UTC), scope.run_id)


def test_the_scope_is_the_last_backfills_run(run_settings: Settings) -> None:
    client = AcceptingKinesis()
    runs = []
    for seed in (1, 2):  # two runs of the workbook: overlapping windows, different runs
        generator = EventGenerator(backfill_config(hours=1, records=200, end=END, seed=seed, anomalies=()))
        runs.append(run_production(run_settings, generator, mode="backfill", generator=generator, client=client,
                                   progress=False))  # fmt: skip
    assert runs[0].run_id != runs[1].run_id
    assert scoring_scope(run_settings).run_id == runs[1].run_id
    assert len(client.data) == 400


def test_a_file_run_leaves_the_backfill_range_alone(run_settings: Settings) -> None:
    generator = EventGenerator(backfill_config(hours=0.5, count=100, end=END, seed=1, anomalies=()))
    run_production(run_settings, generator, mode="backfill", generator=generator, client=AcceptingKinesis(),
                   progress=False)  # fmt: skip
    records = list(EventGenerator(backfill_config(hours=0.5, count=50, end=END + timedelta(days=1), seed=2)))
    summary = run_production(run_settings, records, mode="file", client=AcceptingKinesis(), progress=False)
    assert summary.window_start is None
    assert read_run_summary(run_summary_path(run_settings, "file")) is not None
    scope = scoring_scope(run_settings)
    assert (scope.start, scope.end) == (END - timedelta(hours=0.5), END)
    assert scope.run_id == generator.run_id


def test_without_a_backfill_the_range_must_be_given(run_settings: Settings) -> None:
    with pytest.raises(ConfigError, match="icestream produce --backfill-hours"):
        scoring_scope(run_settings)
    scope = scoring_scope(run_settings, "2026-11-21T02:00:00Z", "2026-11-21T05:00:00+01:00")
    assert (scope.start, scope.end) == (datetime(2026, 11, 21, 2, tzinfo=UTC), datetime(2026, 11, 21, 4, tzinfo=UTC))
    assert (scope.run_id, scope.truth) == (None, ()), "no run to narrow to: every event in the range"
    with pytest.raises(ConfigError, match="after the start"):
        scoring_scope(run_settings, "2026-11-21T02:00:00Z", "2026-11-21T03:00:00+01:00")
    with pytest.raises(ConfigError, match="ISO-8601"):
        scoring_scope(run_settings, "yesterday", "2026-11-21T03:00:00Z")


def test_an_unknown_mode_is_refused(run_settings: Settings) -> None:
    with pytest.raises(ConfigError, match="production mode"):
        run_summary_path(run_settings, "replay")
