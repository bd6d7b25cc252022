"""Record kinds partition the records; flags overlap and are counted apart."""

from __future__ import annotations

from collections import Counter
from typing import Any

from icestream.synthetic.generator import EventGenerator
from icestream.synthetic.kinds import FLAG_DESCRIPTIONS, RECORD_KINDS, kinds_and_flags


def test_kinds_and_flags_split_a_mixed_count() -> None:
    counts = Counter(event=10, duplicate=2, wrong_type_number=0, late=3, anomaly_dropped=4, extra_fields=1, newflag=5)
    kinds, flags = kinds_and_flags(counts)
    assert kinds == {"event": 10, "duplicate": 2}  # a kind that did not occur is not listed
    assert list(flags) == ["late", "extra_fields", "anomaly_dropped", "newflag"]
    assert flags == {"late": 3, "extra_fields": 1, "anomaly_dropped": 4, "newflag": 5}


def test_a_backfills_kinds_add_up_to_its_records_and_its_flags_are_apart(
    backfill: tuple[list[Any], EventGenerator],
) -> None:
    records, generator = backfill
    summary = generator.summary()
    assert summary["kinds"] == dict(Counter(record.kind for record in records))
    assert sum(summary["kinds"].values()) == summary["records"] == len(records)
    assert set(summary["kinds"]) <= set(RECORD_KINDS)
    assert set(summary["flags"]) <= set(FLAG_DESCRIPTIONS)
    assert summary["flags"]["late"] == sum(record.late for record in records if record.kind == "event")
    # Together, as the notebook once showed them, they add up to more than the records.
    assert sum(summary["counts"].values()) > len(records)
