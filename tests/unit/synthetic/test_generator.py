"""The generator: determinism, the funnel, anomaly placement, imperfect data and the configuration."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from icestream.errors import ConfigError
from icestream.lake.schema import DEVICE_FIELDS, REQUIRED_FIELDS
from icestream.limits import MAX_RECORD_BYTES
from icestream.synthetic.generator import (
    RUN_ID_PROPERTY,
    EventGenerator,
    backfill_config,
    generate,
    live_config,
)
from icestream.synthetic.ground_truth import DEFAULT_ANOMALIES, AnomalySpec
from icestream.synthetic.kinds import RECORD_KINDS
from icestream.synthetic.malformed import MALFORMED_KINDS
from icestream.synthetic.model import EVENT_TYPES, PROPERTY_FIELDS, expected_type_shares
from icestream.synthetic.wire import decode_events, parse_ts
from tests.unit.synthetic.ingest_rules import END, reject_reason


def test_same_seed_and_window_give_the_same_records() -> None:
    config = backfill_config(hours=0.25, count=500, end=END, seed=3, anomalies=())
    first, _ = generate(config)
    second, _ = generate(config)
    assert [record.data for record in first] == [record.data for record in second]
    other, _ = generate(backfill_config(hours=0.25, count=500, end=END, seed=4, anomalies=()))
    assert {r.event_id for r in first}.isdisjoint({r.event_id for r in other})


def test_clean_events_follow_the_wire_format(backfill: tuple[list[Any], EventGenerator]) -> None:
    records, generator = backfill
    config = generator.config
    for record in records:
        if record.kind != "event":
            continue
        event = json.loads(record.data)
        assert reject_reason(record.data) is None, event
        assert record.partition_key == event["user_id"]
        assert event["event_type"] in EVENT_TYPES
        assert set(event["properties"]) >= set(PROPERTY_FIELDS[event["event_type"]])
        assert all(isinstance(value, str) for value in event["properties"].values())
        assert tuple(event["device_info"]) == DEVICE_FIELDS
        assert config.start <= parse_ts(event["event_ts"]) < config.end
        assert event["event_ts"].endswith("Z")


def test_users_keep_one_device_and_sessions_have_several_events(backfill: tuple[list[Any], EventGenerator]) -> None:
    events = decode_events(backfill[0])
    devices: dict[str, set[str]] = defaultdict(set)
    sessions: Counter[str] = Counter()
    for event in events:
        devices[event["user_id"]].add(json.dumps(event["device_info"]))
        sessions[event["session_id"]] += 1
    assert all(len(kinds) == 1 for kinds in devices.values())
    assert max(sessions.values()) > 5
    assert 2.0 < len(events) / len(sessions) < 8.0


def test_the_funnel_narrows(backfill: tuple[list[Any], EventGenerator]) -> None:
    counts = backfill[1].type_counts
    assert counts["page_view"] > counts["click"] > counts["add_to_cart"] > counts["purchase"] > 0
    assert set(counts) == set(EVENT_TYPES)
    shares = expected_type_shares()
    assert sum(shares.values()) == pytest.approx(1.0)


def test_counts_add_up_to_the_records_yielded(backfill: tuple[list[Any], EventGenerator]) -> None:
    records, generator = backfill
    by_kind = Counter(record.kind for record in records)
    summary = generator.summary()
    assert summary["records"] == len(records)
    assert all(generator.counts[kind] == by_kind[kind] for kind in RECORD_KINDS)
    assert summary["events"] == by_kind["event"] == sum(generator.type_counts.values())
    assert summary["malformed"] == sum(by_kind[kind] for kind in MALFORMED_KINDS)
    assert generator.counts["late"] == sum(record.late for record in records)
    assert set(MALFORMED_KINDS) <= set(by_kind), "every malformed kind appears at the default rate"


def test_duplicates_repeat_an_event_byte_for_byte(backfill: tuple[list[Any], EventGenerator]) -> None:
    records = backfill[0]
    originals = {record.event_id: record.data for record in records if record.kind == "event"}
    duplicates = [record for record in records if record.kind == "duplicate"]
    assert duplicates
    assert all(originals[record.event_id] == record.data for record in duplicates)


def test_late_events_arrive_after_newer_ones(backfill: tuple[list[Any], EventGenerator]) -> None:
    records = backfill[0]
    assert [r.send_at for r in records] == sorted(r.send_at for r in records), "records come in send order"
    late = [record for record in records if record.late]
    assert late
    assert all(record.send_at - record.event_ts >= 30 for record in late)
    event_times = [record.event_ts for record in records if record.kind == "event"]
    assert any(later < earlier for earlier, later in itertools.pairwise(event_times))


def test_some_events_carry_unknown_extra_fields(backfill: tuple[list[Any], EventGenerator]) -> None:
    extra = [json.loads(record.data) for record in backfill[0] if record.extra_fields]
    assert extra
    assert all(set(event) - {*REQUIRED_FIELDS, "session_id", "properties", "device_info"} for event in extra)


def test_ground_truth_windows_are_long_and_inside_the_history(backfill: tuple[list[Any], EventGenerator]) -> None:
    generator = backfill[1]
    truth = generator.ground_truth
    assert [(a.kind, a.event_type) for a in truth] == [(s.kind, s.event_type) for s in DEFAULT_ANOMALIES]
    for anomaly in truth:
        assert anomaly.end - anomaly.start >= timedelta(minutes=10)
        assert generator.config.start <= anomaly.start < anomaly.end <= generator.config.end
        assert anomaly.start.second == 0, "windows start on a whole minute"
    ordered = sorted(truth, key=lambda a: a.start)
    assert all(a.end <= b.start for a, b in itertools.pairwise(ordered)), "no overlap"


def test_anomalies_are_clear_multiples_of_the_baseline(
    backfill: tuple[list[Any], EventGenerator], per_window: dict[str, dict[int, int]]
) -> None:
    required = {
        "spike": lambda ratio: ratio >= 3.0,
        "drop": lambda ratio: ratio <= 0.2,
        "burst": lambda ratio: ratio >= 5.0,
    }
    for anomaly in backfill[1].ground_truth:
        windows = per_window[anomaly.event_type]
        start, end = int(anomaly.start.timestamp() // 60), int(anomaly.end.timestamp() // 60)
        inside = [windows[m] for m in range(start, end - 4)]  # windows wholly inside the anomaly
        outside = sorted(count for m, count in windows.items() if m + 5 <= start - 5 or m >= end + 5)
        baseline = outside[len(outside) // 2]
        ratio = (sum(inside) / len(inside)) / baseline
        assert required[anomaly.kind](ratio), (anomaly, ratio)


def test_baseline_traffic_has_no_spikes(
    backfill: tuple[list[Any], EventGenerator], per_window: dict[str, dict[int, int]]
) -> None:
    """Outside the anomalies, no 5-minute window of a common type is far from the typical level."""
    truth = backfill[1].ground_truth
    for event_type in ("page_view", "click", "search", "add_to_cart", "login"):
        clear = [
            count
            for minute, count in per_window[event_type].items()
            if not any(
                a.event_type == event_type
                and minute * 60 < a.end.timestamp() + 300
                and (minute + 5) * 60 > a.start.timestamp() - 300
                for a in truth
            )
        ]
        typical = sorted(clear)[len(clear) // 2]
        assert typical >= 40
        assert max(clear) < 2.0 * typical, event_type
        assert min(clear) > 0.4 * typical, event_type


def test_malformed_records_keep_a_partition_key(backfill: tuple[list[Any], EventGenerator]) -> None:
    bad = [record for record in backfill[0] if record.kind in MALFORMED_KINDS]
    assert bad
    assert all(record.partition_key for record in bad)
    assert all(record.partition_key.startswith("k-") for record in bad if record.kind == "missing_user_id")


def test_kinesis_oversized_records_are_generated_on_request() -> None:
    records, generator = generate(backfill_config(hours=0.2, count=200, end=END, kinesis_oversized=2))
    big = [record for record in records if record.kind == "kinesis_oversized"]
    assert len(big) == generator.counts["kinesis_oversized"] == 2
    assert all(record.size > MAX_RECORD_BYTES for record in big)


def test_live_events_start_now_at_the_target_rate() -> None:
    start = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    records, generator = generate(live_config(rate=50, seconds=600, start=start, seed=1, late_rate=0.0))
    events = [record for record in records if record.kind == "event"]
    assert all(start.timestamp() <= record.event_ts < start.timestamp() + 600 for record in events)
    assert 0.8 * 50 * 600 < len(events) < 1.2 * 50 * 600
    assert generator.ground_truth == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rate": 0}, "rate"),
        ({"bad_rate": 1.5}, "bad_rate"),
        ({"users": 0}, "users"),
        ({"malformed_kinds": ("nope",)}, "malformed_kinds"),
        ({"max_event_bytes": 10}, "max_event_bytes"),
    ],
)
def test_config_rejects_bad_values(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        backfill_config(hours=1, end=END, **options)


def test_an_anomaly_that_does_not_fit_is_refused() -> None:
    config = backfill_config(hours=0.5, end=END, anomalies=(AnomalySpec("spike", "click", 4.0, 25.0, 15.0),))
    with pytest.raises(ConfigError, match="does not fit"):
        EventGenerator(config)


@pytest.mark.parametrize(("hours", "records"), [(3.0, 30_000), (1.0, 2_000), (0.5, 137)])
def test_a_backfill_with_records_holds_exactly_that_many_over_the_whole_window(hours: float, records: int) -> None:
    config = backfill_config(hours=hours, records=records, end=END, seed=5, anomalies=DEFAULT_ANOMALIES)
    sent, generator = generate(config)
    assert len(sent) == generator.summary()["records"] == records
    times = sorted(record.event_ts for record in sent)
    span = config.seconds
    assert times[0] - config.start.timestamp() < 0.02 * span, "the history starts at its start"
    assert config.end.timestamp() - times[-1] < 0.02 * span, "and runs to its end: thinned, not cut short"
    assert generator.window_end == config.end
    assert generate(config)[0] == sent, "the same configuration gives the same records"


def test_a_live_run_with_records_ends_when_they_are_reached_and_sends_its_late_events() -> None:
    start = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    config = live_config(rate=200, records=12_000, start=start, seed=2, late_rate=0.1, late_seconds=(5.0, 40.0))
    records, generator = generate(config)
    assert len(records) == generator.summary()["records"] == 12_000
    end = generator.window_end.timestamp()
    assert 0.95 * 60 < end - start.timestamp() < 1.05 * 60, "12,000 records at 200/s: about a minute"
    late = [record for record in records if record.late]
    assert len(late) > 500
    assert all(record.send_at <= end for record in records), "nothing is due after the run's end"
    assert all(r.event_ts < end for r in records)
    # Late records still come after newer events (the ones due past the end leave at the end).
    newest, after_newer = -math.inf, 0
    for record in records:
        after_newer += record.late and record.event_ts < newest
        newest = max(newest, record.event_ts)
    assert after_newer > 0.9 * len(late)


def test_an_open_window_goes_on_past_its_expected_end_until_the_records_are_reached() -> None:
    start = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    config = replace(live_config(rate=50, records=1_000, start=start, seed=3), rate=25.0)  # half the expected rate
    records, generator = generate(config)
    assert len(records) == 1_000
    assert generator.window_end > config.end


def test_every_event_carries_its_runs_id(backfill: tuple[list[Any], EventGenerator]) -> None:
    records, generator = backfill
    assert generator.run_id.startswith("run-")
    assert {event["properties"][RUN_ID_PROPERTY] for event in decode_events(records)} == {generator.run_id}
    assert generator.summary()["run_id"] == generator.run_id
    other = backfill_config(hours=3, count=30_000, end=END, seed=12, anomalies=DEFAULT_ANOMALIES)
    assert EventGenerator(other).run_id != generator.run_id
    assert EventGenerator(generator.config).run_id == generator.run_id


def test_traffic_is_at_its_full_rate_from_the_first_second() -> None:
    start = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    records, _ = generate(live_config(rate=300, seconds=150, start=start, seed=4, late_rate=0.0))
    per_15_seconds = Counter(int((record.event_ts - start.timestamp()) // 15) for record in records)
    typical = sorted(per_15_seconds.values())[len(per_15_seconds) // 2]
    assert per_15_seconds[0] > 0.95 * typical, "sessions already under way when the window opens"
    assert 0.95 * 300 * 15 < typical < 1.05 * 300 * 15, "rate counts records of every kind"


def test_a_live_run_builds_only_the_events_it_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost of a live run is per record sent, whatever the rate (no simulated warm-up, no look-ahead)."""
    built = Counter[str]()
    original = EventGenerator._event

    def counting(self: EventGenerator, *args: Any) -> dict[str, Any]:
        built["events"] += 1
        return original(self, *args)

    monkeypatch.setattr(EventGenerator, "_event", counting)
    records, _ = generate(live_config(rate=50_000, records=5_000, seed=1, late_rate=0.0))
    assert len(records) == 5_000
    assert built["events"] <= 5_000


def test_records_and_count_do_not_mix_and_live_needs_one_bound() -> None:
    with pytest.raises(ConfigError, match="not both"):
        backfill_config(hours=1, count=100, records=100, end=END)
    with pytest.raises(ConfigError, match="duration or a record count"):
        live_config(rate=10)
    with pytest.raises(ConfigError, match="duration or a record count"):
        live_config(rate=10, seconds=5, records=50)
