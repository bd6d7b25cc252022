"""The GetRecords fast path returns exactly what botocore's own parser returns."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import botocore.session
import pytest
from botocore.parsers import JSONParser

from icestream.kinesis.clients import _botocore_session, utc_timestamp
from icestream.kinesis.records_parser import RecordsJSONParser

MODEL = botocore.session.get_session().get_service_model("kinesis")


def answer(document: Any, status: int = 200) -> dict[str, Any]:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    return {"body": body, "headers": {"x-amzn-requestid": "req-1", "content-type": "application/x-amz-json-1.1"},
            "status_code": status}  # fmt: skip


def parsed_both(operation: str, document: Any, status: int = 200) -> tuple[Any, Any]:
    shape = MODEL.operation_model(operation).output_shape
    ours = RecordsJSONParser(timestamp_parser=utc_timestamp).parse(answer(document, status), shape)
    theirs = JSONParser(timestamp_parser=utc_timestamp).parse(answer(document, status), shape)
    return ours, theirs


def record(number: int, **changes: Any) -> dict[str, Any]:
    value = {"SequenceNumber": f"4963{number:052d}", "ApproximateArrivalTimestamp": 1_764_000_000.125 + number,
             "Data": base64.b64encode(random.Random(number).randbytes(40 + number)).decode(),
             "PartitionKey": f"user-{number}"}  # fmt: skip
    value.update(changes)
    return value


@pytest.mark.parametrize(
    "document",
    [
        {"Records": [record(n) for n in range(50)], "NextShardIterator": "it-2", "MillisBehindLatest": 0},
        {"Records": [], "NextShardIterator": "it-2", "MillisBehindLatest": 1200},
        # A closed shard's last answer: no iterator, its children.
        {
            "Records": [record(1)],
            "MillisBehindLatest": 0,
            "ChildShards": [
                {
                    "ShardId": "shardId-000000000004",
                    "ParentShards": ["shardId-000000000001"],
                    "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "17"},
                }
            ],
        },
        # Members the fast path leaves to botocore: encryption, a member the model does not know, nulls,
        # an empty payload, an ISO arrival time, no arrival time.
        {
            "Records": [
                record(1, EncryptionType="KMS"),
                record(2, Extra="x"),
                record(3, PartitionKey=None),
                record(4, Data=""),
                record(5, ApproximateArrivalTimestamp="2026-11-27T10:00:00Z"),
                {k: v for k, v in record(6).items() if k != "ApproximateArrivalTimestamp"},
            ],
            "NextShardIterator": None,
            "MillisBehindLatest": 5,
        },
        {"Records": None, "MillisBehindLatest": 0},
        {"NextShardIterator": "it-3"},
    ],
    ids=["records", "empty", "closed-shard", "unusual-records", "null-records", "no-records"],
)
def test_get_records_answers_parse_as_botocore_parses_them(document: dict[str, Any]) -> None:
    ours, theirs = parsed_both("GetRecords", document)
    assert ours == theirs
    assert [type(r["Data"]) for r in ours.get("Records") or []] == [bytes] * len(ours.get("Records") or [])


@pytest.mark.parametrize(
    ("operation", "document", "status"),
    [
        ("GetRecords", b"not json", 200),
        ("GetRecords", {"__type": "ExpiredIteratorException", "message": "Iterator expired"}, 400),
        ("GetRecords", {"__type": "ProvisionedThroughputExceededException", "message": "Rate exceeded"}, 400),
        (
            "ListShards",
            {
                "Shards": [
                    {
                        "ShardId": "shardId-000000000000",
                        "SequenceNumberRange": {"StartingSequenceNumber": "1"},
                        "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "9"},
                    }
                ]
            },
            200,
        ),
    ],
    ids=["not-json", "expired-iterator", "throttled", "another-operation"],
)
def test_errors_and_other_operations_are_botocores_own(operation: str, document: Any, status: int) -> None:
    ours, theirs = parsed_both(operation, document, status)
    assert ours == theirs


def test_the_clients_session_hands_out_the_records_parser_with_its_timestamp_parser() -> None:
    factory = _botocore_session().get_component("response_parser_factory")
    parser = factory.create_parser("json")
    assert isinstance(parser, RecordsJSONParser)
    assert parser._timestamp_parser is utc_timestamp
    assert type(factory.create_parser("rest-json")) is not RecordsJSONParser
