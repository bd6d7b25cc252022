"""A finished read: how it moves positions and which cached rows it keeps (no JVM)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.exceptions import ClientError

from icestream.config import load_settings
from icestream.errors import IngestError
from icestream.ingest.positions import TRIM_HORIZON, ShardPlan, after
from icestream.ingest.progress import ReadStats
from icestream.ingest.source import ReadBatch, ShardSource, TablePositions


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


# -- a caught-up stream costs no read job ---------------------------------------------------------


class QuietKinesis:
    """Shards in memory: ListShards, and GetRecords from ``"<shard>/<index>"`` iterators."""

    def __init__(self, shards: int) -> None:
        self.records: dict[str, list[str]] = {f"shardId-{n:012d}": [] for n in range(shards)}
        self.closed: set[str] = set()
        self.calls: list[tuple[str, dict]] = []
        self.failure: Exception | None = None

    def list_shards(self, StreamName: str) -> dict:  # noqa: N803 - boto3's names
        self.calls.append(("list_shards", {}))
        shards = []
        for shard in self.records:
            sequence_range = {"StartingSequenceNumber": "1"}
            if shard in self.closed:
                sequence_range["EndingSequenceNumber"] = "999"
            shards.append({"ShardId": shard, "SequenceNumberRange": sequence_range})
        return {"Shards": shards}

    def get_records(self, ShardIterator: str, Limit: int) -> dict:  # noqa: N803 - boto3's names
        self.calls.append(("get_records", {"ShardIterator": ShardIterator, "Limit": Limit}))
        if self.failure is not None:
            raise self.failure
        shard, index = ShardIterator.rsplit("/", 1)
        page = self.records[shard][int(index) : int(index) + Limit]
        return {"Records": page, "NextShardIterator": f"{shard}/{int(index) + len(page)}", "MillisBehindLatest": 0}


def quiet_source(fake: QuietKinesis) -> tuple[ShardSource, list[list[ShardPlan]]]:
    """A source on ``fake`` (no Spark: its read job records its plans and returns an empty read)."""
    source = object.__new__(ShardSource)
    source.settings = load_settings(stream_name="s")
    source._client = fake
    source._iterators = {}
    source._quiet = None
    source._prefetched = None
    source.start_position = TRIM_HORIZON
    jobs: list[list[ShardPlan]] = []

    def read_job(listing: list[dict], plans: list[ShardPlan], batch_id: int) -> ReadBatch:
        jobs.append(plans)
        shards = [
            ReadStats(
                plan.shard_id, next_iterator=f"{plan.shard_id}/{len(fake.records[plan.shard_id])}", millis_behind=0
            )
            for plan in plans
        ]
        return ReadBatch(batch_id, listing, plans, FakeRows(), shards, {}, datetime.now(UTC), 100, read_seconds=0.1)

    source._read = read_job  # type: ignore[method-assign]
    return source, jobs


def next_read(source: ShardSource) -> ReadBatch | None:
    """One trigger as the query runs it: read, then keep the iterators when nothing was new."""
    read = source.next_read(1, TablePositions(), TablePositions())
    if read is not None:
        source.keep_iterators(read, read.advance({}))
    return read


def test_an_idle_stream_is_asked_from_the_driver_and_runs_no_read_job() -> None:
    fake = QuietKinesis(shards=2)
    source, jobs = quiet_source(fake)
    assert next_read(source) is not None, "the first trigger reads"
    assert len(jobs) == 1
    fake.calls.clear()
    for _ in range(3):
        assert next_read(source) is None
    assert len(jobs) == 1, "no read job while nothing arrives"
    assert [name for name, _ in fake.calls] == ["list_shards", "get_records", "get_records"] * 3
    assert all(arguments["Limit"] == 1 for name, arguments in fake.calls if name == "get_records")


def test_a_record_on_any_shard_runs_the_read_from_the_kept_iterator() -> None:
    fake = QuietKinesis(shards=2)
    source, jobs = quiet_source(fake)
    next_read(source)
    assert next_read(source) is None
    fake.records["shardId-000000000001"].append("a record")
    read = next_read(source)
    assert read is not None
    assert len(jobs) == 2
    iterators = {plan.shard_id: plan.iterator for plan in jobs[-1]}
    assert iterators["shardId-000000000001"] == "shardId-000000000001/0", "the probe consumed nothing"


@pytest.mark.parametrize("change", ["closed", "new shard", "error"])
def test_a_changed_listing_or_an_error_ends_the_quiet_spell(change: str) -> None:
    fake = QuietKinesis(shards=2)
    source, jobs = quiet_source(fake)
    next_read(source)
    if change == "closed":
        fake.closed.add("shardId-000000000000")
    elif change == "new shard":
        fake.records["shardId-000000000002"] = []
    else:
        fake.failure = ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "GetRecords")
    next_read(source)
    assert len(jobs) == 2, "the read path plans again (and handles errors with its retries)"


def test_a_shard_behind_the_tip_is_not_quiet() -> None:
    fake = QuietKinesis(shards=1)
    source, jobs = quiet_source(fake)
    read = source.next_read(1, TablePositions(), TablePositions())
    assert read is not None
    read.shards[0].millis_behind = 5_000  # an empty answer away from the tip: more may follow at once
    source.keep_iterators(read, read.advance({}))
    next_read(source)
    assert len(jobs) == 2
