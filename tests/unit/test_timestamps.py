"""Epoch microseconds: exact, one rule for naive datetimes, clamped on the way back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from icestream.timestamps import as_utc, from_micros, to_micros


@given(st.datetimes(timezones=st.just(UTC)))
def test_round_trip_is_exact(moment: datetime) -> None:
    assert from_micros(to_micros(moment)) == moment


def test_naive_is_utc_and_offsets_are_honoured() -> None:
    aware = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    assert to_micros(aware.replace(tzinfo=None)) == to_micros(aware)
    assert to_micros(aware.astimezone(timezone(timedelta(hours=5)))) == to_micros(aware)
    assert as_utc(aware.replace(tzinfo=None)) == aware


def test_large_values_are_exact_and_clamped() -> None:
    assert to_micros(datetime(2262, 4, 11, 23, 47, 16, 854775, tzinfo=UTC)) == 9223372036854775
    assert from_micros(2**63 - 1) == datetime.max.replace(tzinfo=UTC)
    assert from_micros(-(2**63)) == datetime.min.replace(tzinfo=UTC)
