"""The anomalies to inject and the ground-truth file."""

from __future__ import annotations

from pathlib import Path

import pytest

from icestream.errors import ConfigError
from icestream.synthetic.generator import EventGenerator, backfill_config
from icestream.synthetic.ground_truth import (
    DEFAULT_ANOMALIES,
    AnomalySpec,
    parse_anomalies,
    read_ground_truth,
    write_ground_truth,
)
from tests.unit.synthetic.ingest_rules import END


def test_ground_truth_round_trips_through_json_lines(tmp_path: Path) -> None:
    truth = EventGenerator(backfill_config(hours=3, end=END, seed=11, anomalies=DEFAULT_ANOMALIES)).ground_truth
    assert len(truth) == len(DEFAULT_ANOMALIES)
    path = write_ground_truth(truth, tmp_path / "truth.jsonl")
    assert read_ground_truth(path) == truth
    write_ground_truth(truth[:1], path, append=True)
    assert len(read_ground_truth(path)) == len(truth) + 1
    assert read_ground_truth(tmp_path / "absent.jsonl") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("none", ()),
        ("", ()),
        (None, ()),
        ("default", DEFAULT_ANOMALIES),
        ("spike:click:5@30+12", (AnomalySpec("spike", "click", 5.0, 30.0, 12.0),)),
        ("drop:page_view,burst:error:9", (AnomalySpec("drop", "page_view", 0.1), AnomalySpec("burst", "error", 9.0))),
    ],
)
def test_parse_anomalies(text: str | None, expected: tuple[AnomalySpec, ...]) -> None:
    assert parse_anomalies(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spike", "cannot read"),
        ("spike:click:x", "cannot read"),
        ("wobble:click", "anomaly kind"),
        ("spike:teleport", "anomaly event type"),
        ("spike:click:0.5", "must be above 1"),
        ("drop:click:2", "must be in"),
    ],
)
def test_parse_anomalies_explains_bad_input(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_anomalies(text)
