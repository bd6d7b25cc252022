"""The emulator's GetRecords answers, written directly: the same bytes as moto's own answers.

moto runs in-process here (``mock_aws``) with the emulator's patches; each answer's raw body and
content type are captured before botocore parses them, once with the direct answer and once with
moto's own (``KinesisResponse.moto_get_records``), over the same records.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.kinesis import responses

from icestream.kinesis import moto_kinesis
from icestream.kinesis.records_answer import arrival_time, canonical_base64

STREAM = "answer-test"
SHARD = "shardId-000000000000"


@pytest.fixture
def kinesis() -> Iterator[tuple[Any, list[tuple[str, bytes]]]]:
    moto_kinesis.install()
    answers: list[tuple[str, bytes]] = []

    def capture(response_dict: dict[str, Any], **_: Any) -> None:
        answers.append((response_dict["headers"].get("Content-Type"), response_dict["body"]))

    with mock_aws():
        client = boto3.client("kinesis", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
        client.meta.events.register("before-parse.kinesis.GetRecords", capture)
        client.create_stream(StreamName=STREAM, ShardCount=1)
        yield client, answers


def read_all(client: Any, shard: str = SHARD, limit: int = 2) -> int:
    """Read ``shard`` from its start in answers of ``limit`` records until an empty answer or its end."""
    iterator = client.get_shard_iterator(StreamName=STREAM, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    iterator, calls = iterator["ShardIterator"], 0
    while iterator:
        answer = client.get_records(ShardIterator=iterator, Limit=limit)
        calls += 1
        if not answer["Records"]:
            break
        iterator = answer.get("NextShardIterator")
    return calls


def both_answers(client: Any, answers: list[tuple[str, bytes]], monkeypatch: pytest.MonkeyPatch,
                 shard: str = SHARD) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:  # fmt: skip
    """The answers to one read of ``shard`` written directly, then by moto's own method."""
    answers.clear()
    read_all(client, shard)
    direct = list(answers)
    answers.clear()
    with monkeypatch.context() as patch:
        patch.setattr(responses.KinesisResponse, "get_records", responses.KinesisResponse.moto_get_records)
        read_all(client, shard)
    return direct, list(answers)


def test_the_answers_are_moto_s_own_bytes(kinesis: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client, answers = kinesis
    entries = [
        {"Data": b"", "PartitionKey": "empty"},
        {"Data": bytes(range(256)), "PartitionKey": "binary"},
        {"Data": '{"name": "ключ \\u2603"}'.encode(), "PartitionKey": "ключ-☃"},
        {"Data": b"x" * 5000, "PartitionKey": "k" * 256},
        {"Data": b'{"a": 1}', "PartitionKey": "json"},
    ]
    client.put_records(StreamName=STREAM, Records=entries)
    direct, moto_s = both_answers(client, answers, monkeypatch)
    assert len(direct) == 4  # 2 + 2 + 1 records, then the empty answer at the tip
    assert direct == moto_s
    assert {content_type for content_type, _ in direct} == {"application/x-amz-json-1.1"}
    # And the records read back are the records put, through botocore's parser.
    iterator = client.get_shard_iterator(StreamName=STREAM, ShardId=SHARD, ShardIteratorType="TRIM_HORIZON")
    answer = client.get_records(ShardIterator=iterator["ShardIterator"])
    assert answer["ResponseMetadata"]["RequestId"]  # moto's request id header, still there
    records = answer["Records"]
    assert [(record["Data"], record["PartitionKey"]) for record in records] == [
        (entry["Data"], entry["PartitionKey"]) for entry in entries
    ]


def test_a_closed_shard_read_to_its_end_answers_as_moto_does(kinesis: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client, answers = kinesis
    client.put_records(StreamName=STREAM, Records=[{"Data": b"before", "PartitionKey": str(n)} for n in range(3)])
    client.split_shard(StreamName=STREAM, ShardToSplit=SHARD, NewStartingHashKey=str(2**127))
    direct, moto_s = both_answers(client, answers, monkeypatch)
    assert direct == moto_s
    assert len(direct) >= 2


def test_an_unknown_iterator_is_moto_s_error(kinesis: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client, _ = kinesis
    bad = base64.b64encode(f"{STREAM}:shardId-000000000099:1".encode()).decode()
    with pytest.raises(ClientError) as direct:
        client.get_records(ShardIterator=bad)
    with monkeypatch.context() as patch:
        patch.setattr(responses.KinesisResponse, "get_records", responses.KinesisResponse.moto_get_records)
        with pytest.raises(ClientError) as moto_s:
            client.get_records(ShardIterator=bad)
    assert direct.value.response["Error"] == moto_s.value.response["Error"]
    assert direct.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


@pytest.mark.parametrize(
    ("stored", "answered"),
    [("eA==", "eA=="), ("eA==\n", "eA=="), ("eHh4\neHh4", "eHh4eHh4"), ("", "")],
)
def test_data_is_answered_as_canonical_base64(stored: str, answered: str) -> None:
    assert canonical_base64(stored) == answered == base64.b64encode(base64.b64decode(stored)).decode()


def test_arrival_times_are_cut_to_the_millisecond() -> None:
    assert arrival_time(datetime(2026, 11, 27, 12, 0, 0)) == 1795780800
    assert arrival_time(datetime(2026, 11, 27, 12, 0, 0, 123999)) == 1795780800.123
    assert arrival_time(datetime(2026, 11, 27, 12, 0, 0, 999)) == 1795780800
