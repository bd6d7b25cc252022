"""A finished read: how it moves positions and which cached rows it keeps (no JVM)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from icestream.errors import IngestError
from icestream.ingest.positions import TRIM_HORIZON, ShardPlan, after
from icestream.ingest.progress import ReadStats
from icestream.ingest.source import ReadBatch


class FakeRows:
    """Records the predicate a DataFrame would be filtered with."""

    def where(self, predicate: str) -> str:
        return predicate


def read_of(*stats: ReadStats, closed: bool = False) -> ReadBatch:
    plans = [ShardPlan(shard.shard_id, TRIM_HORIZON, closed, None, None) for shard in stats]
    return ReadBatch(1, [], plans, FakeRows(), list(stats), {}, datetime.now(UTC), 100, read_seconds=0.1)


def test_positions_advance_past_what_was_read() -> None:
    read = read_of(
        ReadStats("shardId-000000000000", read=3, last_sequence="1002"),
        ReadStats("shardId-000000000001"),  # nothing new: keeps where it was planned to start
        ReadStats("shardId-000000000002", read=1, last_sequence="3000", finished=True),
    )
    assert read.advance({"shardId-000000000001": after("2000")}) == {
        "shardId-000000000000": after("1002"),
        "shardId-000000000001": after("2000"),
        "shardId-000000000002": "END:3000",
    }
    assert read.records == 4
    assert read.any_finished
    assert not read.capped


def test_kept_rows_are_those_the_first_read_reported() -> None:
    read = read_of(ReadStats("shardId-000000000000", read=2, last_sequence="1001"), ReadStats("shardId-000000000001"))
    assert read.kept("event") == (
        "kind = 'event' AND ((shard_id = 'shardId-000000000000' AND (octet_length(sequence_number) < 4 OR "
        "(octet_length(sequence_number) = 4 AND sequence_number <= '1001'))))"
    )
    assert read_of(ReadStats("shardId-000000000001")).kept("reject") == "kind = 'reject' AND (false)"


def test_a_shard_id_not_in_kinesis_format_never_reaches_sql() -> None:
    with pytest.raises(IngestError, match="unexpected shard id"):
        read_of(ReadStats("x' OR '1'='1", read=1, last_sequence="1")).kept("event")


def test_a_read_that_ended_inside_an_aggregate_advances_to_its_sub_sequence_number() -> None:
    read = read_of(ReadStats("shardId-000000000000", read=100, last_sequence="1002", last_sub=41))
    assert read.advance({}) == {"shardId-000000000000": "AFTER:1002:41"}
    assert read.capped
    # The rows kept are by sequence number: the read yielded no user record past 41 of 1002.
    assert "sequence_number <= '1002'" in read.kept("event")
