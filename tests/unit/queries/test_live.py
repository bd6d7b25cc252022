"""The lag a live look measures (docs/glossary.md): the stream's newest arrival minus the oldest uncommitted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from icestream.ingest.positions import after, ended
from icestream.queries.live import Uncommitted, stream_lag_s, stream_uncommitted, stream_uncommitted_since

BEGAN = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)  # record n of a shard arrived n seconds after this


class FakeStream:
    """Shards with a tip: records after a committed sequence number, and how far behind the tip the next one is."""

    def __init__(self, shards: dict[str, tuple[int, int]]) -> None:
        # shard -> (last sequence number in the shard, milliseconds from its oldest record to its newest)
        self.shards = shards
        self.reads: list[str] = []

    def list_shards(self, StreamName: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        return {"Shards": [{"ShardId": shard} for shard in self.shards]}

    def get_shard_iterator(self, StreamName: str, ShardId: str, ShardIteratorType: str, **start: Any) -> dict:  # noqa: N803
        after_sequence = int(start.get("StartingSequenceNumber", 0)) if ShardIteratorType != "TRIM_HORIZON" else 0
        return {"ShardIterator": f"{ShardId}|{after_sequence}"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803
        shard, after_sequence = ShardIterator.split("|")
        self.reads.append(shard)
        last, span_ms = self.shards[shard]
        if int(after_sequence) >= last:
            return {"Records": [], "MillisBehindLatest": 0}
        # One record per second: the next one arrived (last - next) seconds before the tip.
        behind = min(span_ms, (last - int(after_sequence) - 1) * 1000)
        sequence = int(after_sequence) + 1
        record = {"SequenceNumber": str(sequence), "ApproximateArrivalTimestamp": BEGAN + timedelta(seconds=sequence)}
        return {"Records": [record], "MillisBehindLatest": behind}


def test_a_drained_stream_has_lag_0() -> None:
    stream = FakeStream({"shard-0": (100, 99_000), "shard-1": (50, 49_000)})
    assert stream_lag_s(stream, "s", {"shard-0": after("100"), "shard-1": after("50")}) == 0.0


def test_the_lag_is_the_shard_furthest_behind() -> None:
    stream = FakeStream({"shard-0": (100, 99_000), "shard-1": (50, 49_000)})
    # shard-0: records 91..100 uncommitted, the oldest 9 s before the newest; shard-1 drained.
    assert stream_lag_s(stream, "s", {"shard-0": after("90"), "shard-1": after("50")}) == 9.0


def test_a_shard_without_a_position_is_behind_from_its_oldest_record_and_an_ended_one_is_skipped() -> None:
    stream = FakeStream({"shard-0": (30, 29_000), "shard-1": (50, 49_000)})
    assert stream_lag_s(stream, "s", {"shard-1": ended("50")}) == 29.0
    assert stream.reads == ["shard-0"]


def test_what_waits_in_the_stream_is_dated_by_its_oldest_record() -> None:
    stream = FakeStream({"shard-0": (100, 99_000), "shard-1": (50, 49_000)})
    drained = {"shard-0": after("100"), "shard-1": after("50")}
    assert stream_uncommitted_since(stream, "s", drained) is None
    # shard-0 waits from record 91, shard-1 from record 41: the older one dates what waits.
    waiting = stream_uncommitted_since(stream, "s", {"shard-0": after("90"), "shard-1": after("40")})
    assert waiting == BEGAN + timedelta(seconds=41)

    # Both figures from one look (02's end): one GetRecords per shard, and they agree.
    stream.reads.clear()
    left = stream_uncommitted(stream, "s", {"shard-0": after("90"), "shard-1": after("50")})
    assert (left.lag_s, left.since) == (9.0, BEGAN + timedelta(seconds=91))
    assert stream.reads == ["shard-0", "shard-1"]
    assert stream_uncommitted(stream, "s", drained) == Uncommitted(0.0, None)


def test_a_look_the_ingest_moved_under_it_is_taken_again_and_other_errors_are_not() -> None:
    from icestream.queries.live import LOOK_ATTEMPTS, SCAN_MOVED, look_again_if_moved

    looks: list[int] = []

    def moved_once() -> str:
        looks.append(1)
        if len(looks) == 1:
            raise RuntimeError(f"java.lang.IllegalStateException: {SCAN_MOVED}: resolved Spark table snapshot ...")
        return "frames"

    assert look_again_if_moved(moved_once) == "frames"
    assert len(looks) == 2

    def always_moved() -> str:
        looks.append(1)
        raise RuntimeError(SCAN_MOVED)

    looks.clear()
    with pytest.raises(RuntimeError, match=SCAN_MOVED):
        look_again_if_moved(always_moved)
    assert len(looks) == LOOK_ATTEMPTS

    def broken() -> str:
        looks.append(1)
        raise ValueError("no such column")

    looks.clear()
    with pytest.raises(ValueError, match="no such column"):
        look_again_if_moved(broken)
    assert len(looks) == 1
