"""The background producer's bounds: a duration or a record count, never both, at most six hours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icestream.config import Settings, load_settings
from icestream.errors import ConfigError
from icestream.producer.background import (
    DRAIN_MARGIN_SECONDS,
    BackgroundProducerStatus,
    ingest_seconds,
    start_background_producer,
)


@pytest.fixture
def run_settings(tmp_path: Path) -> Settings:
    return load_settings(run_dir=str(tmp_path))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"duration": 10.0, "count": 100}, "not both"),
        ({"count": 0}, "at least 1"),
        ({"count": 10_000_000, "rate": 100.0}, "duration ≤"),
        ({"duration": 7 * 3600.0}, "duration ≤"),
        ({"rate": 0.0, "count": 10}, "positive number of records per second"),
    ],
)
def test_bounds_are_checked_before_anything_starts(
    run_settings: Settings, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        start_background_producer(run_settings, **options)
    assert not (run_settings.path("run_dir") / "producer.json").exists()


def _status(running: bool, ends_by: float | None) -> BackgroundProducerStatus:
    return BackgroundProducerStatus(running, 1, 900.0, ends_by, None, "summary.json", None, "")


def test_the_ingest_runs_until_a_running_producer_has_ended_and_its_last_records_are_committed() -> None:
    assert ingest_seconds(_status(True, 1060.0), 40.0, 2.0, now=1000.0) == 60.0 + 2 * 2.0 + DRAIN_MARGIN_SECONDS
    assert ingest_seconds(_status(True, 1005.0), 40.0, 2.0, now=1000.0) == 40.0, "the minimum still holds"
    assert ingest_seconds(_status(False, 1060.0), 40.0, 2.0, now=1000.0) == 40.0, "an ended producer sends nothing"
