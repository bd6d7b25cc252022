"""KPL aggregates and compressed payloads in the shard reader: expansion, rejects, cuts and resumes."""

from __future__ import annotations

import gzip
import json

from icestream.ingest.expand import RECORD_REJECT_REASONS, expand_record
from icestream.ingest.positions import TRIM_HORIZON, after, committed_mark, earliest, mark_key
from icestream.ingest.reading.shard_plan import ShardPlan, plan_shards
from icestream.kinesis.compression import compress
from icestream.kinesis.kpl import encode_aggregate
from tests.helpers.fake_kinesis import FakeKinesis, payload, read_fake_shard


class AggregateKinesis(FakeKinesis):
    """The fake shard, with AT_SEQUENCE_NUMBER (a batch that ended inside an aggregate reads it again)."""

    def get_shard_iterator(self, **arguments: object) -> dict:
        if arguments["ShardIteratorType"] == "AT_SEQUENCE_NUMBER":
            self.calls.append(("get_shard_iterator", arguments))
            at = int(arguments["StartingSequenceNumber"])  # type: ignore[arg-type]
            return {"ShardIterator": str(sum(1 for record in self.records if int(record["SequenceNumber"]) < at))}
        return super().get_shard_iterator(**arguments)


def aggregate(first: int, count: int, key: str = "u1") -> bytes:
    return encode_aggregate([(f"{key}-{number}", payload(number)) for number in range(first, first + count)])


def test_plain_payloads_pass_through_untouched() -> None:
    data = payload(1)
    [part] = expand_record(data, "k", 1000)
    assert (part.sub, part.partition_key, part.payload, part.rejection) == (None, "k", data, None)


def test_an_aggregate_of_compressed_user_records_expands_in_order() -> None:
    data = encode_aggregate([("a", compress(payload(1), "gzip")), ("b", compress(payload(2), "zlib")), ("c", b"{")])
    parts = expand_record(data, "outer", 1000)
    assert [(part.sub, part.partition_key) for part in parts] == [(0, "a"), (1, "b"), (2, "c")]
    assert [part.payload for part in parts] == [payload(1), payload(2), b"{"]


def test_reader_expands_aggregates_and_decompresses_payloads() -> None:
    fake = FakeKinesis([aggregate(0, 3), gzip.compress(payload(3)), compress(payload(4), "zlib"), payload(5)])
    rows, meta, _ = read_fake_shard(fake)
    assert [row["event_id"] for row in rows] == [f"e{number}" for number in range(6)]
    assert [row["partition_key"] for row in rows[:3]] == ["u1-0", "u1-1", "u1-2"]  # each its own key
    assert {row["sequence_number"] for row in rows[:3]} == {"1000"}
    assert (meta["read"], meta["good"], meta["aggregated"], meta["last_sequence"]) == (6, 6, 1, "1003")


def test_corrupt_payloads_are_rejected_with_reasons() -> None:
    good = aggregate(0, 2)
    bad_checksum = good[:-1] + bytes([good[-1] ^ 1])
    fake = FakeKinesis([
        bad_checksum,
        gzip.compress(payload(1))[:-5],
        gzip.compress(b" " * 70_000),  # a small bomb: above the 64 KiB event limit once expanded
        encode_aggregate([("a", payload(7)), ("b", b"\x1f\x8bbroken")]),
    ])  # fmt: skip
    rows, meta, _ = read_fake_shard(fake)
    rejects = [(row["reason"], row["sequence_number"]) for row in rows if row["kind"] == "reject"]
    assert rejects == [("corrupt_aggregate", "1000"), ("corrupt_compressed", "1001"), ("oversized", "1002"),
                       ("corrupt_compressed", "1003")]  # fmt: skip
    assert set(RECORD_REJECT_REASONS) <= set(meta["reasons"])
    assert rows[0]["raw_data"] == bad_checksum  # the whole aggregate is kept, as read
    assert "MD5" in rows[0]["detail"]
    assert rows[-1]["detail"].startswith("user record 1 of a KPL aggregate")
    assert rows[-1]["raw_data"] == b"\x1f\x8bbroken"
    invalid = gzip.compress(b'{"event_id": ')
    [row] = read_fake_shard(FakeKinesis([invalid]))[0]
    assert (row["reason"], row["raw_data"], row["raw_text"]) == ("invalid_json", invalid, '{"event_id": ')
    assert rows[-1]["partition_key"] == "b"
    assert [row["event_id"] for row in rows if row["kind"] == "event"] == ["e7"]


def test_a_cap_inside_an_aggregate_ends_there_and_the_next_batch_resumes_after_it() -> None:
    fake = AggregateKinesis([aggregate(0, 5), aggregate(5, 5), payload(10)])
    seen: list[str] = []
    start = TRIM_HORIZON
    for _ in range(6):
        rows, meta, _ = read_fake_shard(fake, ShardPlan("shardId-0", start, False, None, None), max_records=3)
        seen += [row["event_id"] for row in rows]
        assert meta["next_iterator"] is None or meta["last_sub"] is None  # no iterator from mid-aggregate
        if not rows:
            break
        start = after(meta["last_sequence"], meta["last_sub"])
    assert seen == [f"e{number}" for number in range(11)]  # each exactly once, in order
    starts = [
        (arguments["ShardIteratorType"], arguments.get("StartingSequenceNumber"))
        for name, arguments in fake.calls
        if name == "get_shard_iterator"
    ]
    assert starts[:3] == [("TRIM_HORIZON", None), ("AT_SEQUENCE_NUMBER", "1000"), ("AT_SEQUENCE_NUMBER", "1001")]


def test_a_cap_at_an_aggregate_end_is_a_whole_record_position() -> None:
    fake = AggregateKinesis([aggregate(0, 3), aggregate(3, 3)])
    _, meta, _ = read_fake_shard(fake, max_records=3)
    assert (meta["last_sequence"], meta["last_sub"], meta["next_iterator"]) == ("1000", None, None)


def test_replay_inside_an_aggregate_skips_exactly_the_committed_user_records() -> None:
    # Events committed up to user record 1 of aggregate 1000, rejects to user record 3 (they differ
    # after a crash between the two commits): the re-read writes each row to its table once.
    data = encode_aggregate([("a", payload(0)), ("b", b"{"), ("c", payload(2)), ("d", b"[")])
    fake = AggregateKinesis([data, payload(4)])
    plan = ShardPlan("shardId-0", after("1000", 1), False, "1000:1", "1000:3")
    rows, meta, _ = read_fake_shard(fake, plan)
    assert [(row["kind"], row["event_id"] or row["reason"]) for row in rows] == [("event", "e2"), ("event", "e4")]
    assert (meta["replayed_events"], meta["replayed_rejects"]) == (0, 1)  # user record 3 is "["


def test_positions_with_sub_sequence_numbers_order_and_stay_compatible() -> None:
    assert after("17") == "AFTER:17"
    assert after("17", 2) == "AFTER:17:2"
    assert committed_mark("AFTER:17:2") == "17:2"
    assert committed_mark("END:17") == "17"
    assert mark_key("16") < mark_key("17:0") < mark_key("17:5") < mark_key("17") < mark_key("18:0")
    assert earliest("AFTER:17", "AFTER:17:3") == "AFTER:17:3"
    assert earliest("AFTER:17:3", "AFTER:9") == "AFTER:9"
    assert json.loads(json.dumps({"s": after("17", 0)})) == {"s": "AFTER:17:0"}


def test_plans_start_at_the_table_further_behind_inside_an_aggregate() -> None:
    listing = [{"ShardId": "shardId-0", "SequenceNumberRange": {"StartingSequenceNumber": "1"}}]
    [plan] = plan_shards(listing, {"shardId-0": "AFTER:1000:1"}, {"shardId-0": "AFTER:1000:3"}, TRIM_HORIZON)
    assert (plan.start, plan.events_committed, plan.rejects_committed) == ("AFTER:1000:1", "1000:1", "1000:3")
    [plan] = plan_shards(listing, {"shardId-0": "AFTER:1000"}, {"shardId-0": "AFTER:1000:3"}, TRIM_HORIZON)
    assert plan.start == "AFTER:1000:3"
