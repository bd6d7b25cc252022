"""A finished read: how it moves positions and which cached rows it keeps (no JVM)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from botocore.exceptions import ClientError

from icestream.errors import IngestError
from icestream.ingest.options import IngestOptions
from icestream.ingest.positions import TRIM_HORIZON, after, last_sequence
from icestream.ingest.reading.planner import ReadBatch, ShardSource, TablePositions
from icestream.ingest.reading.read_stats import ReadStats
from icestream.ingest.reading.shard_plan import ShardPlan


class FakeRows:
    """Records the predicate a DataFrame would be filtered with."""

    def where(self, predicate: str) -> str:
        return predicate


def read_of(*stats: ReadStats, closed: bool = False) -> ReadBatch:
    plans = [ShardPlan(shard.shard_id, TRIM_HORIZON, closed, None, None) for shard in stats]
    return ReadBatch(1, [], plans, FakeRows(), list(stats), {}, datetime.now(UTC), read_seconds=0.1)


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
    read = read_of(ReadStats("shardId-000000000000", read=100, last_sequence="1002", last_sub=41, capped=True))
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

    def describe_stream_summary(self, StreamName: str) -> dict:  # noqa: N803 - boto3's names
        return {"StreamDescriptionSummary": {"StreamCreationTimestamp": datetime(2026, 11, 1, tzinfo=UTC)}}

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

    def probes(self) -> list[tuple[str, int]]:
        """The GetRecords calls made so far: (iterator, Limit)."""
        calls = self.calls
        return [(arguments["ShardIterator"], arguments["Limit"]) for name, arguments in calls if name == "get_records"]


class FakeConnection:
    def __init__(self, client: QuietKinesis) -> None:
        self._client = client

    def client(self) -> QuietKinesis:
        return self._client


class Clock:
    """Monotonic seconds that move only when a test moves them."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Trigger:
    """A source on ``fake`` and the query's side of each trigger (no Spark: the read job is faked).

    The fake read job reads each planned shard from its plan's iterator (or its start position) to
    the end of what the fake holds, records its plans in ``jobs`` and what it read in ``reads``.
    """

    def __init__(self, fake: QuietKinesis, clock: Clock | None = None, **options: object) -> None:
        self.fake = fake
        self.clock = clock or Clock()
        self.source = ShardSource(
            None,  # type: ignore[arg-type] - the read job below replaces Spark's
            "s",
            FakeConnection(fake),  # type: ignore[arg-type]
            IngestOptions(**options),  # type: ignore[arg-type]
            threading.Event(),
            lambda phase, batch_id: None,
            lambda error: None,
            self.clock,
        )
        self.source._read = self._read_job  # type: ignore[method-assign]
        self.jobs: list[list[ShardPlan]] = []
        self.reads: list[int] = []
        self.on_driver: list[bool] = []  # per read: asked of the driver (tip_read), not of a Spark job
        self.processed: dict[str, str] = {}

    def _read_job(self, listing: list[dict], plans: list[ShardPlan], batch_id: int, on_driver: bool) -> ReadBatch:
        self.jobs.append(plans)
        self.on_driver.append(on_driver)
        shards = []
        for plan in plans:
            records = self.fake.records[plan.shard_id]
            first = int(plan.iterator.rsplit("/", 1)[1]) if plan.iterator else int(last_sequence(plan.start) or 0)
            shards.append(
                ReadStats(
                    plan.shard_id, read=len(records) - first,
                    last_sequence=str(len(records)) if len(records) > first else None,
                    next_iterator=f"{plan.shard_id}/{len(records)}", millis_behind=0,
                    capped=len(records) - first >= 100,  # as a reader capped at 100 says it
                )
            )  # fmt: skip
        read = ReadBatch(batch_id, listing, plans, FakeRows(), shards, {}, datetime.now(UTC), read_seconds=0.1)
        self.reads.append(read.records)
        return read

    def __call__(self) -> ReadBatch | None:
        """One trigger as the query runs it: read, then move the positions and keep the iterators."""
        read = self.source.next_read(1, TablePositions.same(self.processed), TablePositions.same(self.processed))
        if read is not None:
            self.processed = read.advance(self.processed)
            self.source.keep_iterators(read, self.processed)
        return read

    def close(self) -> None:
        self.source.close()


@pytest.fixture
def triggers() -> Iterator[Callable[..., Trigger]]:
    made: list[Trigger] = []

    def make(fake: QuietKinesis, clock: Clock | None = None, **options: object) -> Trigger:
        made.append(Trigger(fake, clock, **options))
        return made[-1]

    yield make
    for trigger in made:
        trigger.close()


def test_an_idle_stream_is_asked_from_the_driver_and_runs_no_read_job(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=2)
    trigger = triggers(fake)
    assert trigger() is not None, "the first trigger reads"
    assert len(trigger.jobs) == 1
    fake.calls.clear()
    for _ in range(3):
        assert trigger() is None
    assert len(trigger.jobs) == 1, "no read job while nothing arrives"
    assert [name for name, _ in fake.calls] == ["list_shards", "get_records", "get_records"] * 3
    assert all(limit == 1 for _, limit in fake.probes())


def test_a_record_on_any_shard_runs_the_read_from_the_kept_iterator(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=2)
    trigger = triggers(fake)
    trigger()
    assert trigger() is None
    fake.records["shardId-000000000001"].append("a record")
    read = trigger()
    assert read is not None
    assert len(trigger.jobs) == 2
    iterators = {plan.shard_id: plan.iterator for plan in trigger.jobs[-1]}
    assert iterators["shardId-000000000001"] == "shardId-000000000001/0", "the probe consumed nothing"


@pytest.mark.parametrize("min_records", [None, 5])
@pytest.mark.parametrize("change", ["closed", "new shard", "error"])
def test_a_changed_listing_or_an_error_ends_the_quiet_spell(
    triggers: Callable[..., Trigger], change: str, min_records: int | None
) -> None:
    fake = QuietKinesis(shards=2)
    trigger = triggers(fake, min_records=min_records)
    trigger()
    if change == "closed":
        fake.closed.add("shardId-000000000000")
    elif change == "new shard":
        fake.records["shardId-000000000002"] = []
    else:
        fake.failure = ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "GetRecords")
    trigger()
    assert len(trigger.jobs) == 2, "the read path plans again (and handles errors with its retries)"


def test_a_shard_behind_the_tip_is_not_quiet(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=1)
    trigger = triggers(fake)
    read = trigger.source.next_read(1, TablePositions(), TablePositions())
    assert read is not None
    read.shards[0].millis_behind = 5_000  # an empty answer away from the tip: more may follow at once
    trigger.source.keep_iterators(read, read.advance({}))
    trigger()
    assert len(trigger.jobs) == 2


# -- min_records and max_trigger_delay_seconds: fewer, larger batches ---------------------------------


def test_fewer_records_than_min_records_run_no_read_job_and_are_counted_once(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=2)
    trigger = triggers(fake, min_records=5)
    trigger()  # the first trigger reads (nothing yet)
    fake.records["shardId-000000000000"] += ["a", "b"]
    fake.records["shardId-000000000001"] += ["c"]
    fake.calls.clear()
    for _ in range(3):
        assert trigger() is None
    assert len(trigger.jobs) == 1, "3 of 5 records: no read job"
    assert trigger.source._gate.counted == 3
    # The probes asked for what was still needed and moved past what they counted: the second and
    # third triggers asked from after the three records, not from the start again.
    assert fake.probes() == [
        ("shardId-000000000000/0", 5), ("shardId-000000000001/0", 3),
        ("shardId-000000000000/2", 2), ("shardId-000000000001/1", 2),
        ("shardId-000000000000/2", 2), ("shardId-000000000001/1", 2),
    ]  # fmt: skip


def test_reaching_min_records_reads_every_record_from_the_kept_iterators(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=2)
    trigger = triggers(fake, min_records=5)
    trigger()
    fake.records["shardId-000000000000"] += ["a", "b"]
    fake.records["shardId-000000000001"] += ["c"]
    assert trigger() is None
    fake.records["shardId-000000000001"] += ["d", "e"]
    read = trigger()
    assert read is not None, "5 records counted: the read job runs"
    assert trigger.reads == [0, 5], "one batch holds every record, the ones counted earlier too"
    assert {plan.shard_id: plan.iterator for plan in trigger.jobs[-1]} == {
        "shardId-000000000000": "shardId-000000000000/0",
        "shardId-000000000001": "shardId-000000000001/0",
    }, "the read starts where the last read ended, not where the probes got to"


def test_after_a_batch_the_count_starts_again(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=1)
    trigger = triggers(fake, min_records=3)
    trigger()
    fake.records["shardId-000000000000"] += ["a", "b", "c"]
    assert trigger() is not None
    fake.records["shardId-000000000000"] += ["d", "e"]
    assert trigger() is None, "2 new records after the batch: held back"
    assert len(trigger.jobs) == 2


def test_after_max_trigger_delay_one_waiting_record_runs_the_batch(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=2)
    clock = Clock()
    trigger = triggers(fake, clock, min_records=100, max_trigger_delay_seconds=60.0)
    trigger()
    fake.records["shardId-000000000001"] += ["a"]
    clock.now += 59.0
    assert trigger() is None, "before the delay, 1 of 100 records waits"
    clock.now += 1.0
    assert trigger() is not None, "the delay has passed since the last batch and a record waits"
    assert trigger.reads == [0, 1]


def test_after_max_trigger_delay_with_nothing_waiting_no_batch_runs(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=2)
    clock = Clock()
    trigger = triggers(fake, clock, min_records=100, max_trigger_delay_seconds=60.0)
    trigger()
    clock.now += 61.0
    for _ in range(3):
        assert trigger() is None
        clock.now += 30.0  # a trigger every 30 s: the probe iterators stay far from their expiry
    assert len(trigger.jobs) == 1, "no empty batch, however long since the last one"
    fake.records["shardId-000000000000"] += ["a"]
    assert trigger() is not None, "the first record after the delay runs at the next trigger"


def test_without_min_records_a_batch_with_records_is_followed_by_a_read(triggers: Callable[..., Trigger]) -> None:
    # As before min_records existed: only a read that found nothing makes the next trigger ask first.
    fake = QuietKinesis(shards=1)
    trigger = triggers(fake)
    fake.records["shardId-000000000000"] += ["a"]
    assert trigger() is not None
    fake.calls.clear()
    assert trigger() is not None, "the next trigger runs the read job (which finds nothing)"
    assert fake.probes() == []
    assert trigger() is None, "then the driver asks"


def test_reset_forgets_what_was_counted(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=1)
    trigger = triggers(fake, min_records=5)
    trigger()
    fake.records["shardId-000000000000"] += ["a"]
    assert trigger() is None
    trigger.source.reset()  # what a failed batch does: only the tables count
    assert trigger.source._gate.counted == 0
    assert trigger() is not None, "after a reset the read path runs"


def test_available_now_ignores_min_records(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=1)
    trigger = triggers(fake, available_now=True, min_records=5)
    trigger()
    fake.records["shardId-000000000000"] += ["a"]
    assert trigger() is not None, "a scheduled run drains what is there"


def test_a_probe_iterator_near_its_expiry_runs_the_read_path(triggers: Callable[..., Trigger]) -> None:
    fake = QuietKinesis(shards=1)
    clock = Clock()
    trigger = triggers(fake, clock, min_records=5)
    trigger()
    fake.records["shardId-000000000000"] += ["a"]
    assert trigger() is None
    clock.now += 240.0  # a trigger four minutes later: Kinesis iterators expire after five
    assert trigger() is not None
    assert trigger.reads == [0, 1]


@pytest.mark.parametrize("tip_on_driver", [True, False])
def test_a_batch_after_a_read_that_ended_at_the_tip_is_read_on_the_driver(
    triggers: Callable[..., Trigger], tip_on_driver: bool
) -> None:
    fake = QuietKinesis(shards=2)
    shard = "shardId-000000000000"
    fake.records[shard] += [f"r{n}" for n in range(150)]  # the fake read caps at 100: a backlog
    trigger = triggers(fake, tip_on_driver=tip_on_driver)
    assert trigger().capped, "the first read is of a backlog"
    fake.records[shard] += ["late-1"]
    assert not trigger().capped  # read after a capped one: still by Spark; it ends at the tip
    fake.records[shard] += ["late-2"]
    assert trigger().records == 1
    trigger.source.reset()  # a failed batch: only the tables count, and the next read is Spark's
    trigger.processed = {}
    trigger()
    assert trigger.on_driver == [False, False, tip_on_driver, False]
