"""The raw archive's retention cutoff: whole UTC days, so expiry drops whole partitions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from icestream.config import load_settings
from icestream.errors import ConfigError
from icestream.lake.archive import archive_cutoff


@pytest.mark.parametrize(
    ("now", "days", "cutoff"),
    [
        (datetime(2026, 11, 23, 15, 0, tzinfo=UTC), 30, datetime(2026, 10, 24, tzinfo=UTC)),
        (datetime(2026, 11, 23, 0, 0, tzinfo=UTC), 1, datetime(2026, 11, 22, tzinfo=UTC)),
        # 01:00 at UTC+2 is 23:00 UTC the day before.
        (datetime(2026, 11, 23, 1, 0, tzinfo=timezone(timedelta(hours=2))), 1, datetime(2026, 11, 21, tzinfo=UTC)),
    ],
)
def test_the_cutoff_is_the_start_of_the_oldest_day_kept(now: datetime, days: int, cutoff: datetime) -> None:
    assert archive_cutoff(now, days) == cutoff


@pytest.mark.parametrize("days", [0, -1, 1.5])
def test_a_retention_below_a_day_is_refused(days) -> None:
    with pytest.raises(ConfigError, match="at least 1 day"):
        archive_cutoff(datetime.now(UTC), days)


def test_a_naive_time_is_refused() -> None:
    with pytest.raises(ConfigError, match="timezone-aware"):
        archive_cutoff(datetime(2026, 11, 23), 30)


def test_the_settings_default_to_no_archive_and_30_days(monkeypatch) -> None:
    settings = load_settings()
    assert (settings.archive_raw, settings.archive_retention_days) == (False, 30)
    assert settings.archive_table_name == f"{settings.table_name}_raw"
    monkeypatch.setenv("ICESTREAM_ARCHIVE_RAW", "true")
    monkeypatch.setenv("ICESTREAM_ARCHIVE_RETENTION_DAYS", "7")
    assert (load_settings().archive_raw, load_settings().archive_retention_days) == (True, 7)
    monkeypatch.setenv("ICESTREAM_ARCHIVE_RETENTION_DAYS", "0")
    with pytest.raises(ConfigError, match="ARCHIVE_RETENTION_DAYS"):
        load_settings()
