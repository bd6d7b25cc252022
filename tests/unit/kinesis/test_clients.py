"""Kinesis clients: the cheap timestamp parser gives the same instants as botocore's own."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.utils import parse_timestamp

from icestream.kinesis.clients import utc_timestamp


@pytest.mark.parametrize("value", [0, 1_763_704_800, 1_763_704_800.123, "2026-11-21T06:00:00Z", "1763704800"])
def test_same_instant_as_botocore(value: object) -> None:
    ours, theirs = utc_timestamp(value), parse_timestamp(value)
    assert ours == theirs
    assert ours.utcoffset() is not None


def test_epoch_numbers_become_utc_datetimes() -> None:
    assert utc_timestamp(1_763_704_800.5) == datetime(2025, 11, 21, 6, 0, 0, 500000, tzinfo=UTC)
    assert utc_timestamp(1_763_704_800).tzinfo is UTC
