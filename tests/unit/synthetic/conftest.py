"""Fixtures of the generator's tests: one three-hour backfill shared by every test that reads it."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

from icestream.synthetic.generator import EventGenerator, backfill_config, generate
from icestream.synthetic.ground_truth import DEFAULT_ANOMALIES
from tests.unit.synthetic.ingest_rules import END


@pytest.fixture(scope="session")
def backfill() -> tuple[list[Any], EventGenerator]:
    """Three hours of history with the default anomalies and imperfect data (about 30,000 events)."""
    return generate(backfill_config(hours=3, count=30_000, end=END, seed=11, anomalies=DEFAULT_ANOMALIES))


@pytest.fixture(scope="session")
def per_window(backfill: tuple[list[Any], EventGenerator]) -> dict[str, dict[int, int]]:
    """Clean events per event type in 5-minute windows sliding by 1 minute (window start minute → count)."""
    records, _ = backfill
    per_minute: dict[str, Counter[int]] = defaultdict(Counter)
    for record in records:
        if record.kind == "event":
            per_minute[record.event_type][int(record.event_ts // 60)] += 1
    first, last = int(min(r.event_ts for r in records) // 60), int(max(r.event_ts for r in records) // 60)
    return {
        event_type: {start: sum(minutes[start + offset] for offset in range(5)) for start in range(first, last - 4)}
        for event_type, minutes in per_minute.items()
    }
