"""The background producer's bounds: a duration or a record count, never both, at most six hours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icestream.config import Settings, load_settings
from icestream.errors import ConfigError
from icestream.producer.background import start_background_producer


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
