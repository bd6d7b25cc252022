"""The producer's KPL aggregation: per-shard packing, order per key, the record limit, compression."""

from __future__ import annotations

import pytest

from icestream.errors import ConfigError
from icestream.kinesis.compression import decompress
from icestream.kinesis.kpl import decode_aggregate, is_aggregate
from icestream.producer.aggregate import AGGREGATE_KIND, Aggregator, open_shard_starts, shard_of
from icestream.synthetic.wire import Record

HALF = 2**127
SHARDS = [
    {"ShardId": "a", "HashKeyRange": {"StartingHashKey": "0"}, "SequenceNumberRange": {}},
    {"ShardId": "b", "HashKeyRange": {"StartingHashKey": str(HALF)}, "SequenceNumberRange": {}},
    {"ShardId": "old", "HashKeyRange": {"StartingHashKey": "5"}, "SequenceNumberRange": {"EndingSequenceNumber": "9"}},
]


def record(number: int, key: str, size: int = 20) -> Record:
    return Record(data=f"{number:05d}".encode() + b"x" * size, partition_key=key, kind="event", event_ts=0.0,
                  send_at=float(number))  # fmt: skip


def user_records(sent: list[Record], compressed: bool = False) -> list[tuple[str, bytes]]:
    out = []
    for item in sent:
        parts = decode_aggregate(item.data) if is_aggregate(item.data) else None
        pairs = [(part.partition_key, part.data) for part in parts] if parts else [(item.partition_key, item.data)]
        out += [(key, decompress(data, 10**6) if compressed else data) for key, data in pairs]
    return out


def test_aggregates_hold_n_records_of_one_shard_and_keep_each_keys_order() -> None:
    starts = open_shard_starts(SHARDS)
    assert starts == [0, HALF]
    keys = [f"user-{number}" for number in range(10)]
    records = [record(number, keys[number % 10]) for number in range(100)]
    aggregator = Aggregator(per_aggregate=4, shard_starts=starts)
    sent = list(aggregator.records(records))
    assert aggregator.user_records == 100
    for item in sent:
        members = decode_aggregate(item.data) if is_aggregate(item.data) else []
        assert len(members) <= 4
        # Every member maps to the shard the aggregate's own key maps to.
        assert {shard_of(member.partition_key, starts) for member in members} <= {shard_of(item.partition_key, starts)}
    got = user_records(sent)
    assert sorted(got) == sorted((item.partition_key, item.data) for item in records)
    for key in keys:  # each key's records in the order they were given
        assert [data for k, data in got if k == key] == [item.data for item in records if item.partition_key == key]
    assert sum(item.kind == AGGREGATE_KIND for item in sent) == aggregator.aggregates >= 20


def test_aggregates_stay_within_the_record_limit() -> None:
    records = [record(number, "k", size=300) for number in range(50)]
    sent = list(Aggregator(per_aggregate=1000, max_record_bytes=2000).records(records))
    assert all(len(item.data) + len(item.partition_key) <= 2000 for item in sent)
    assert len(sent) > 1
    assert user_records(sent) == [("k", item.data) for item in records]


def test_compression_alone_and_inside_aggregates() -> None:
    records = [record(number, "k") for number in range(5)]
    plain = list(Aggregator(compression="gzip").records(records))
    assert [item.data[:2] for item in plain] == [b"\x1f\x8b"] * 5
    assert user_records(plain, compressed=True) == [("k", item.data) for item in records]
    packed = list(Aggregator(per_aggregate=5, compression="zlib").records(records))
    assert len(packed) == 1
    assert user_records(packed, compressed=True) == [("k", item.data) for item in records]


@pytest.mark.parametrize(("changes", "message"), [({"per_aggregate": 0}, "aggregate"), ({"compression": "xz"}, "xz")])
def test_bad_options_are_refused(changes: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Aggregator(**changes)
