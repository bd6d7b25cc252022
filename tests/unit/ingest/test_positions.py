"""Positions: ordering, and which shards a batch reads (parents before children)."""

from __future__ import annotations

import pytest

from icestream.ingest import positions as pos
from icestream.ingest.reading import shard_plan


def shard(shard_id: str, *parents: str, closed: bool = False) -> dict:
    record: dict = {"ShardId": shard_id, "SequenceNumberRange": {"StartingSequenceNumber": "1"}}
    if closed:
        record["SequenceNumberRange"]["EndingSequenceNumber"] = "999"
    for key, parent in zip(("ParentShardId", "AdjacentParentShardId"), parents, strict=False):
        record[key] = parent
    return record


def test_sequence_numbers_compare_as_integers_not_strings() -> None:
    long_a = "49590338271490256608559692538361571095921575989136588898"
    long_b = "49590338271490256608559692538361571095921575989136588899"
    assert pos.sequence_key("10") > pos.sequence_key("9")
    assert pos.sequence_key(long_b) > pos.sequence_key(long_a)
    assert pos.earliest(pos.after("9"), pos.after("10")) == pos.after("9")


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (None, pos.after("5"), None),
        (pos.after("5"), pos.ended("9"), pos.after("5")),
        (pos.ended("9"), pos.ended("9"), pos.ended("9")),
        (pos.TRIM_HORIZON, pos.after("5"), pos.TRIM_HORIZON),
    ],
)
def test_earliest(first: str | None, second: str | None, expected: str | None) -> None:
    assert pos.earliest(first, second) == expected
    assert pos.earliest(second, first) == expected


def test_positions_encode_compactly_and_sorted() -> None:
    assert pos.encode_positions({"b": pos.after("2"), "a": pos.TRIM_HORIZON}) == '{"a":"TRIM_HORIZON","b":"AFTER:2"}'


def test_fresh_stream_starts_every_shard_at_the_starting_position() -> None:
    plans = shard_plan.plan_shards([shard("s0"), shard("s1")], {}, {}, pos.TRIM_HORIZON)
    assert [(plan.shard_id, plan.start) for plan in plans] == [("s0", "TRIM_HORIZON"), ("s1", "TRIM_HORIZON")]


def test_split_child_waits_for_its_parent() -> None:
    shards = [shard("p", closed=True), shard("c1", "p"), shard("c2", "p")]
    reading_parent = shard_plan.plan_shards(shards, {"p": pos.after("7")}, {"p": pos.after("7")}, "AT_TIMESTAMP:1")
    assert [plan.shard_id for plan in reading_parent] == ["p"]
    assert reading_parent[0].closed
    done = {"p": pos.ended("9")}
    children = shard_plan.plan_shards(shards, done, done, "AT_TIMESTAMP:1")
    # Children start at the horizon, whatever the query's starting position: nothing is skipped.
    assert [(plan.shard_id, plan.start) for plan in children] == [("c1", "TRIM_HORIZON"), ("c2", "TRIM_HORIZON")]


def test_merge_child_waits_for_both_parents() -> None:
    shards = [shard("a", closed=True), shard("b", closed=True), shard("m", "a", "b")]
    one_done = {"a": pos.ended("3"), "b": pos.after("2")}
    assert [plan.shard_id for plan in shard_plan.plan_shards(shards, one_done, one_done, pos.TRIM_HORIZON)] == ["b"]
    both = {"a": pos.ended("3"), "b": pos.ended("4")}
    assert [plan.shard_id for plan in shard_plan.plan_shards(shards, both, both, pos.TRIM_HORIZON)] == ["m"]


def test_parent_must_be_finished_in_both_tables() -> None:
    # A crash between the rejects commit and the events commit leaves the tables apart.
    shards = [shard("p", closed=True), shard("c", "p")]
    plans = shard_plan.plan_shards(shards, {"p": pos.after("8")}, {"p": pos.ended("9")}, pos.TRIM_HORIZON)
    assert [(plan.shard_id, plan.start) for plan in plans] == [("p", "AFTER:8")]
    assert plans[0].events_committed == "8"
    assert plans[0].rejects_committed == "9"


def test_expired_parent_no_longer_listed_counts_as_finished() -> None:
    plans = shard_plan.plan_shards([shard("c", "gone")], {}, {}, pos.TRIM_HORIZON)
    assert [plan.shard_id for plan in plans] == ["c"]


def test_read_from_the_table_that_is_behind() -> None:
    plans = shard_plan.plan_shards([shard("s")], {"s": pos.after("20")}, {"s": pos.after("12")}, pos.TRIM_HORIZON)
    assert plans[0].start == pos.after("12")
    assert (plans[0].events_committed, plans[0].rejects_committed) == ("20", "12")


def test_one_table_without_positions_reads_from_the_start() -> None:
    plans = shard_plan.plan_shards([shard("s")], {"s": pos.after("20")}, {}, pos.TRIM_HORIZON)
    assert plans[0].start == pos.TRIM_HORIZON
    assert plans[0].events_committed == "20"
    assert plans[0].rejects_committed is None


def test_finished_shards_are_not_read_again() -> None:
    done = {"s": pos.ended("5")}
    assert shard_plan.plan_shards([shard("s", closed=True)], done, done, pos.TRIM_HORIZON) == []
