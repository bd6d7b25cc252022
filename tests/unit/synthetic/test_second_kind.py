"""Order events beside user events, a field added mid-run, and the truth per table (all opt-in)."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from icestream.errors import ConfigError
from icestream.synthetic.generator import backfill_config, generate, live_config
from icestream.synthetic.second_kind import (
    NEW_FIELD,
    ORDER_EVENT_TYPE,
    ORDER_STATUSES,
    id_checksum,
    read_tables_truth,
    table_of,
    write_tables_truth,
)
from icestream.synthetic.wire import parse_ts
from tests.unit.synthetic.ingest_rules import END, reject_reason

PLAIN = backfill_config(hours=0.5, count=1_500, end=END, seed=5, anomalies=())
MIXED = replace(PLAIN, order_rate=0.4, new_field_after=900.0)


@pytest.fixture(scope="module")
def mixed() -> tuple[list, object]:
    return generate(MIXED)


def test_the_options_off_change_nothing() -> None:
    records, generator = generate(PLAIN)
    again, _ = generate(replace(PLAIN, order_rate=0.0, new_field_after=None))
    assert [record.data for record in records] == [record.data for record in again]
    assert generator.tables is None
    assert MIXED.run_id != PLAIN.run_id  # a mixed run is another run
    assert replace(PLAIN, order_rate=0.0).run_id == PLAIN.run_id


def test_user_records_stay_the_same_and_orders_are_added_in_send_order(mixed: tuple[list, object]) -> None:
    records, generator = mixed
    plain, _ = generate(PLAIN)
    users = [record for record in records if record.kind != "order"]
    assert [(r.event_id, r.kind, r.send_at) for r in users] == [(r.event_id, r.kind, r.send_at) for r in plain]
    orders = [record for record in records if record.kind == "order"]
    assert 0.25 * MIXED.seconds < len(orders) < 0.55 * MIXED.seconds  # about 0.4 per second
    assert all(a.send_at <= b.send_at for a, b in itertools.pairwise(orders))
    merged = [record.send_at for record in records]
    positions = {id(record): index for index, record in enumerate(records)}
    for order in orders:  # every user record sent before it comes before it
        index = positions[id(order)]
        assert all(send_at <= order.send_at for send_at in merged[:index] if send_at is not None)
    assert generator.counts["order"] == len(orders)
    assert generator.summary()["records"] == len(records)


def test_order_events_are_valid_and_follow_a_lifecycle(mixed: tuple[list, object]) -> None:
    orders = [json.loads(record.data) for record in mixed[0] if record.kind == "order"]
    assert all(reject_reason(json.dumps(order).encode()) is None for order in orders)  # today's ingest keeps them
    assert {order["event_type"] for order in orders} == {ORDER_EVENT_TYPE}
    assert {order["status"] for order in orders} <= set(ORDER_STATUSES)
    assert len({order["event_id"] for order in orders}) == len(orders)
    by_order: dict[str, list[dict]] = {}
    for order in orders:
        by_order.setdefault(order["order_id"], []).append(order)
    assert any(len(steps) > 1 for steps in by_order.values())  # orders move on
    for steps in by_order.values():
        assert steps[0]["status"] == "created"
        assert len({(step["user_id"], step["amount"], step["currency"]) for step in steps}) == 1
        assert all(MIXED.start <= parse_ts(step["event_ts"]) < MIXED.end for step in steps)


def test_the_new_field_appears_from_t_on_user_events_only(mixed: tuple[list, object]) -> None:
    since = MIXED.start.timestamp() + 900.0
    carried = {True: 0, False: 0}
    for record in mixed[0]:
        if record.kind in ("event", "duplicate"):
            event = json.loads(record.data)
            assert (NEW_FIELD in event) == (record.event_ts >= since)
            if NEW_FIELD in event:
                assert event[NEW_FIELD] == event["device_info"]["app_version"]
            carried[NEW_FIELD in event] += 1
        elif record.kind == "order":
            assert NEW_FIELD not in json.loads(record.data)
    assert carried[True] > 0
    assert carried[False] > 0


def test_truth_per_table_counts_each_row_once(mixed: tuple[list, object], tmp_path: Path) -> None:
    records, generator = mixed
    truths = {truth.table: truth for truth in generator.tables.truths()}
    events = [r for r in records if table_of(r) == "events"]
    orders = [r for r in records if table_of(r) == "orders"]
    assert truths["events"].rows == len(events) == generator.counts["event"]
    assert truths["orders"].rows == len(orders)
    assert truths["events"].id_checksum == id_checksum(reversed([r.event_id for r in events]))
    assert truths["orders"].id_checksum == id_checksum(r.event_id for r in orders)
    assert truths["orders"].route_value == ORDER_EVENT_TYPE
    assert truths["events"].route_value is None
    since = MIXED.start.timestamp() + 900.0
    assert truths["events"].rows_with_new_field == sum(r.event_ts >= since for r in events)
    assert truths["orders"].rows_with_new_field == 0
    assert truths["events"].new_field == NEW_FIELD
    path = write_tables_truth(truths.values(), tmp_path / "truth.jsonl")
    assert read_tables_truth(path) == list(truths.values())
    assert read_tables_truth(tmp_path / "absent.jsonl") == []


def test_a_doubled_or_lost_id_changes_the_checksum() -> None:
    ids = ["a", "b", "c"]
    assert id_checksum(ids) == id_checksum(["c", "a", "b"])
    assert id_checksum([*ids, "a"]) != id_checksum(ids)
    assert id_checksum(ids[:2]) != id_checksum(ids)


def test_the_same_seed_gives_the_same_mixed_stream(mixed: tuple[list, object]) -> None:
    again, _ = generate(MIXED)
    assert [record.data for record in again] == [record.data for record in mixed[0]]


def test_a_live_run_with_a_record_count_stops_orders_at_its_end() -> None:
    config = live_config(rate=50.0, records=400, start=END, seed=2, order_rate=5.0, new_field_after=2.0)
    records, generator = generate(config)
    users = [record for record in records if record.kind != "order"]
    assert len(users) == 400
    end = generator.window_end.timestamp()
    assert all(record.event_ts < end for record in records if record.kind == "order")
    assert any(record.kind == "order" for record in records)


@pytest.mark.parametrize(("option", "value"), [("order_rate", -1.0), ("new_field_after", -5.0)])
def test_bad_options_are_refused(option: str, value: float) -> None:
    with pytest.raises(ConfigError, match=option):
        replace(PLAIN, **{option: value})
