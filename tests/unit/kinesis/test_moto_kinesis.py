"""The emulator's record store: Kinesis semantics at constant cost per call, and retention.

moto runs in-process here (``mock_aws``), with the same patches the emulator server installs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from moto import mock_aws

from icestream.errors import EmulatorError
from icestream.kinesis import moto_kinesis

STREAM = "store-test"


@pytest.fixture
def kinesis() -> Iterator[object]:
    moto_kinesis.install()
    with mock_aws():
        client = boto3.client("kinesis", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
        client.create_stream(StreamName=STREAM, ShardCount=1)
        yield client


def put(client: object, count: int, start: int = 0) -> list[str]:
    numbers = []
    for offset in range(0, count, 500):
        entries = [
            {"Data": f"r{start + offset + index}".encode(), "PartitionKey": "k"}
            for index in range(min(500, count - offset))
        ]
        answer = client.put_records(StreamName=STREAM, Records=entries)
        numbers += [entry["SequenceNumber"] for entry in answer["Records"]]
    return numbers


def shard_id(client: object) -> str:
    return client.list_shards(StreamName=STREAM)["Shards"][0]["ShardId"]


def read_all(client: object, iterator_type: str = "TRIM_HORIZON", limit: int = 10_000, **position: object) -> list:
    iterator = client.get_shard_iterator(
        StreamName=STREAM, ShardId=shard_id(client), ShardIteratorType=iterator_type, **position
    )["ShardIterator"]
    records = []
    while True:
        answer = client.get_records(ShardIterator=iterator, Limit=limit)
        records += answer["Records"]
        if not answer["Records"]:
            return records
        iterator = answer["NextShardIterator"]


def test_records_come_back_in_order_in_pages_of_the_limit(kinesis: object) -> None:
    numbers = put(kinesis, 1234)
    assert numbers == [str(n) for n in range(1, 1235)]
    records = read_all(kinesis, limit=100)
    assert [r["Data"].decode() for r in records] == [f"r{n}" for n in range(1234)]
    first_page = kinesis.get_records(
        ShardIterator=kinesis.get_shard_iterator(StreamName=STREAM, ShardId=shard_id(kinesis),
                                                 ShardIteratorType="TRIM_HORIZON")["ShardIterator"],
        Limit=100,
    )  # fmt: skip
    assert len(first_page["Records"]) == 100


def test_positional_iterators(kinesis: object) -> None:
    put(kinesis, 50)
    after = read_all(kinesis, "AFTER_SEQUENCE_NUMBER", StartingSequenceNumber="20")
    at = read_all(kinesis, "AT_SEQUENCE_NUMBER", StartingSequenceNumber="20")
    assert [r["SequenceNumber"] for r in after] == [str(n) for n in range(21, 51)]
    assert [r["SequenceNumber"] for r in at] == [str(n) for n in range(20, 51)]
    assert read_all(kinesis, "LATEST") == []
    put(kinesis, 1, start=50)
    ranges = kinesis.list_shards(StreamName=STREAM)["Shards"][0]["SequenceNumberRange"]
    assert ranges["StartingSequenceNumber"] == "1"


def test_at_timestamp_finds_the_first_record_at_or_after_the_time(kinesis: object) -> None:
    put(kinesis, 30)
    time.sleep(0.05)  # gaps between the sends and the cut are the test's input, not a wait for anything
    middle = datetime.now(UTC)
    time.sleep(0.05)
    put(kinesis, 30, start=30)
    records = read_all(kinesis, "AT_TIMESTAMP", Timestamp=middle)
    assert [r["Data"].decode() for r in records] == [f"r{n}" for n in range(30, 60)]
    assert len(read_all(kinesis, "AT_TIMESTAMP", Timestamp=datetime(2000, 1, 1, tzinfo=UTC))) == 60


def test_records_older_than_retention_are_dropped_and_numbering_goes_on(
    kinesis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(kinesis, 10)
    monkeypatch.setattr(moto_kinesis, "now", lambda: time.time() + 24 * 3600 + 60)  # a day later
    assert read_all(kinesis) == []  # expired, as Kinesis does after 24 hours
    monkeypatch.setattr(moto_kinesis, "now", time.time)  # new records arrive now
    assert put(kinesis, 3, start=10) == ["11", "12", "13"]
    assert [r["Data"].decode() for r in read_all(kinesis)] == ["r10", "r11", "r12"]
    assert [r["SequenceNumber"] for r in read_all(kinesis, "AFTER_SEQUENCE_NUMBER", StartingSequenceNumber="5")] == [
        "11",
        "12",
        "13",
    ]


def test_a_longer_retention_keeps_the_records(kinesis: object, monkeypatch: pytest.MonkeyPatch) -> None:
    kinesis.increase_stream_retention_period(StreamName=STREAM, RetentionPeriodHours=48)
    put(kinesis, 10)
    monkeypatch.setattr(moto_kinesis, "now", lambda: time.time() + 25 * 3600)
    assert len(read_all(kinesis)) == 10


def test_an_unchecked_moto_version_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    import moto

    monkeypatch.setattr(moto, "__version__", "9.9.9")
    with pytest.raises(EmulatorError, match=r"moto 9\.9\.9 is installed"):
        moto_kinesis.install()
