"""The entity stream: late, replayed and malformed changes are there, and its truth is what the rule derives."""

from __future__ import annotations

import json

import pytest

from icestream.synthetic.entities import apply_rule, order_changes


@pytest.mark.parametrize("shape", ["flat", "debezium"])
@pytest.mark.parametrize("seed", [1, 7, 23])
def test_the_truth_is_what_the_order_rule_derives_from_the_records_in_send_order(shape: str, seed: int) -> None:
    stream = order_changes(orders=30, changes=600, seed=seed, shape=shape)
    assert apply_rule(stream.records, shape) == stream.truth
    assert stream.deleted
    assert stream.truth
    assert not set(stream.truth) & stream.deleted
    assert min(stream.sent[kind] for kind in ("change", "late", "replay", "malformed")) > 0
    assert sum(stream.sent.values()) == len(stream.records)


def test_arrival_order_alone_would_be_wrong_so_the_stream_tests_the_rule() -> None:
    stream = order_changes(orders=30, changes=600, seed=7)
    last_arrival: dict[int, dict] = {}
    for payload, _ in stream.records:
        try:
            document = json.loads(payload)
        except ValueError:
            continue
        if type(document.get("order_id")) is int and document.get("op") in ("c", "u", "d"):
            last_arrival[document["order_id"]] = document
    differ = [key for key, document in last_arrival.items()
              if (document["op"] == "d") != (key not in stream.truth) or
              (key in stream.truth and document["version"] != stream.truth[key]["version"])]  # fmt: skip
    assert differ, "late and replayed changes make the last arrival differ from the truth for some orders"


def test_same_seed_same_records() -> None:
    assert order_changes(seed=3).records == order_changes(seed=3).records
    assert order_changes(seed=3).records != order_changes(seed=4).records


def test_a_stream_whose_every_order_is_deleted_goes_on_by_creating_one_again() -> None:
    # Few orders and many deletes: at some step no order is live; that step creates a deleted one again.
    stream = order_changes(orders=3, changes=500, seed=5, delete_share=0.5)
    assert apply_rule(stream.records) == stream.truth
    assert stream.sent["change"] + stream.sent["late"] > 400
