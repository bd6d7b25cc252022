"""Kinesis's per-shard write limits in the emulator: the budgets, and PutRecords/PutRecord answering as Kinesis does.

moto runs in-process here (``mock_aws``) with the emulator's patches and a clock the test moves.
"""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from icestream.kinesis import moto_kinesis
from icestream.kinesis.write_limits import WriteLimits, most_bytes_admitted
from icestream.limits import MAX_BYTES_PER_SHARD_SECOND, MAX_RECORD_BYTES, MAX_RECORDS_PER_SHARD_SECOND, THROTTLED

STREAM = "limits-test"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_shard_takes_a_second_of_records_at_once_then_refills_at_the_rate() -> None:
    clock = Clock()
    limits = WriteLimits(clock=clock)
    assert all(limits.admit("s", "shard-0", 10) for _ in range(MAX_RECORDS_PER_SHARD_SECOND))
    assert not limits.admit("s", "shard-0", 10), "the 1,001st record within the second"
    assert limits.admit("s", "shard-1", 10), "another shard has its own budget"
    assert limits.admit("other", "shard-0", 10), "and so has another stream's shard"
    clock.now += 0.25
    assert sum(limits.admit("s", "shard-0", 10) for _ in range(400)) == MAX_RECORDS_PER_SHARD_SECOND // 4
    clock.now += 60
    assert sum(limits.admit("s", "shard-0", 10) for _ in range(3000)) == MAX_RECORDS_PER_SHARD_SECOND, (
        "an idle shard saves up one second's worth, no more"
    )


def test_a_shard_takes_a_mebibyte_per_second() -> None:
    clock = Clock()
    limits = WriteLimits(clock=clock)
    big = 600 * 1024
    assert limits.admit("s", "shard-0", big)
    assert not limits.admit("s", "shard-0", big), "1.2 MiB within the second"
    clock.now += 0.1  # 102 KiB back: 526 KiB in the budget
    assert not limits.admit("s", "shard-0", big)
    assert limits.admit("s", "shard-0", MAX_BYTES_PER_SHARD_SECOND - big - 1)
    clock.now += 1.0
    assert limits.admit("s", "shard-0", big)


@pytest.mark.parametrize("seconds", [0.5, 2.8, 10.0])
def test_a_flood_gets_one_seconds_worth_at_once_then_the_rate(seconds: float) -> None:
    # Notebook 01's hot shard: 4,000-byte records offered as fast as they are taken.
    clock, size, admitted = Clock(), 4000, 0
    limits = WriteLimits(clock=clock)
    start = clock.now
    while clock.now - start <= seconds + 1e-9:
        while limits.admit("s", "shard-0", size):
            admitted += size
        clock.now += 0.01
    assert most_bytes_admitted(seconds) - 2 * size < admitted <= most_bytes_admitted(seconds)
    # The mean over the run is above the limit by the burst; beyond the burst it is the limit.
    assert admitted / seconds > MAX_BYTES_PER_SHARD_SECOND
    assert (admitted - MAX_BYTES_PER_SHARD_SECOND) / seconds <= MAX_BYTES_PER_SHARD_SECOND


@pytest.fixture
def limited() -> Iterator[tuple[object, Clock]]:
    clock = Clock()
    moto_kinesis.install(write_limits=WriteLimits(clock=clock))
    try:
        with mock_aws():
            client = boto3.client("kinesis", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
            client.create_stream(StreamName=STREAM, ShardCount=1)
            yield client, clock
    finally:
        moto_kinesis.install(write_limits=None)  # the process's other tests run without limits


def entries(count: int, first: int = 0) -> list[dict[str, object]]:
    return [{"Data": f"r{first + index}".encode(), "PartitionKey": "k"} for index in range(count)]


def test_put_records_beyond_the_limit_fails_those_entries_only(limited: tuple[object, Clock]) -> None:
    client, clock = limited
    for first in (0, 500):
        assert client.put_records(StreamName=STREAM, Records=entries(500, first))["FailedRecordCount"] == 0
    answer = client.put_records(StreamName=STREAM, Records=entries(500, 1000))
    assert answer["FailedRecordCount"] == 500
    shard = client.list_shards(StreamName=STREAM)["Shards"][0]["ShardId"]
    assert {entry["ErrorCode"] for entry in answer["Records"]} == {THROTTLED}
    assert all(
        shard in entry["ErrorMessage"] and "Rate exceeded" in entry["ErrorMessage"] for entry in answer["Records"]
    )
    clock.now += 0.125
    answer = client.put_records(StreamName=STREAM, Records=entries(500, 1000))
    assert answer["FailedRecordCount"] == 375, "an eighth of a second brings back 125 records"
    assert all("SequenceNumber" in entry for entry in answer["Records"][:125])
    iterator = client.get_shard_iterator(StreamName=STREAM, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    stored = client.get_records(ShardIterator=iterator["ShardIterator"], Limit=10_000)["Records"]
    assert [record["Data"] for record in stored] == [f"r{n}".encode() for n in range(1125)], (
        "refused ones are not stored"
    )


def test_put_record_beyond_the_limit_is_refused_with_kinesis_error(limited: tuple[object, Clock]) -> None:
    client, clock = limited
    client.put_record(StreamName=STREAM, Data=b"x" * (1024 * 1024 - 1), PartitionKey="k")
    with pytest.raises(ClientError) as refused:
        client.put_record(StreamName=STREAM, Data=b"y", PartitionKey="k")
    assert refused.value.response["Error"]["Code"] == THROTTLED
    clock.now += 1.0
    assert client.put_record(StreamName=STREAM, Data=b"y", PartitionKey="k")["SequenceNumber"]


def test_without_limits_puts_go_through_at_any_rate() -> None:
    moto_kinesis.install(write_limits=None)
    with mock_aws():
        client = boto3.client("kinesis", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
        client.create_stream(StreamName=STREAM, ShardCount=1)
        for first in range(0, 3000, 500):
            assert client.put_records(StreamName=STREAM, Records=entries(500, first))["FailedRecordCount"] == 0


@pytest.mark.parametrize("limits", [True, False], ids=["limits on", "limits off"])
def test_put_record_over_a_mebibyte_is_invalid_not_throttled(limited: tuple[object, Clock], limits: bool) -> None:
    client, _clock = limited
    if not limits:
        moto_kinesis.install(write_limits=None)
    with pytest.raises(ClientError) as refused:  # Kinesis: data and partition key at most 1 MiB, never retryable
        client.put_record(StreamName=STREAM, Data=b"x" * (MAX_RECORD_BYTES + 1), PartitionKey="k")
    error = refused.value.response["Error"]
    assert error["Code"] == "ValidationException"
    assert error["Message"] == (
        "1 validation error detected: Value at 'data' failed to satisfy constraint: "
        f"Member must have length less than or equal to {MAX_RECORD_BYTES}"
    )
    assert client.put_record(StreamName=STREAM, Data=b"x" * (MAX_RECORD_BYTES - 1), PartitionKey="k")["SequenceNumber"]
