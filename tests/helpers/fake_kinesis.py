"""An in-memory Kinesis for unit tests: one shard with Kinesis's iterator semantics; a PutRecords that accepts all."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from icestream.ingest.positions import TRIM_HORIZON
from icestream.ingest.reading.record_rows import ROW_FIELDS
from icestream.ingest.reading.shard_plan import ShardPlan
from icestream.ingest.reading.shard_reader import ReadOptions, read_shard
from icestream.kinesis.clients import KinesisConnection
from icestream.limits import MAX_RECORDS_PER_GET


def payload(number: int, event_id: str | None = None) -> bytes:
    """A small valid event ``e<number>`` (or ``event_id``) of user ``u1``."""
    return json.dumps(
        {
            "event_id": event_id or f"e{number}",
            "user_id": "u1",
            "event_type": "click",
            "event_ts": "2026-11-21T05:00:00Z",
        }
    ).encode()


class FakeKinesis:
    """One shard in memory, with Kinesis's iterator semantics and a queue of faults to inject."""

    def __init__(self, payloads: list[bytes], closed: bool = False) -> None:
        self.records = [
            {"SequenceNumber": str(1000 + i), "Data": data, "PartitionKey": "u1",
             "ApproximateArrivalTimestamp": datetime(2026, 11, 21, 5, 0, i % 60, tzinfo=UTC)}
            for i, data in enumerate(payloads)
        ]  # fmt: skip
        self.closed = closed
        self.faults: list[Exception] = []
        self.calls: list[tuple[str, dict]] = []

    def get_shard_iterator(self, **arguments: object) -> dict:
        self.calls.append(("get_shard_iterator", arguments))
        if arguments["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER":
            after_seq = int(arguments["StartingSequenceNumber"])  # type: ignore[arg-type]
            index = sum(1 for record in self.records if int(record["SequenceNumber"]) <= after_seq)
        else:
            index = 0
        return {"ShardIterator": str(index)}

    def get_records(self, ShardIterator: str, Limit: int) -> dict:  # noqa: N803 - boto3's names
        self.calls.append(("get_records", {"ShardIterator": ShardIterator, "Limit": Limit}))
        if self.faults:
            raise self.faults.pop(0)
        index = int(ShardIterator)
        page = self.records[index : index + min(Limit, MAX_RECORDS_PER_GET)]
        end = index + len(page)
        behind = 0 if end >= len(self.records) else 5000
        next_iterator = None if (self.closed and end >= len(self.records) and not page) else str(end)
        return {"Records": page, "NextShardIterator": next_iterator, "MillisBehindLatest": behind}


def options(**changes: object) -> ReadOptions:
    """Read options for stream ``s`` on an endpoint nothing listens on (the fake client is passed in)."""
    base = {"connection": KinesisConnection("local", "us-east-1", "http://127.0.0.1:1"), "stream_name": "s"}
    return ReadOptions(**{**base, **changes})  # type: ignore[arg-type]


def read_fake_shard(
    fake: FakeKinesis, plan: ShardPlan | None = None, **changes: object
) -> tuple[list[dict], dict, list[float]]:
    """Read the fake shard with :func:`read_shard`; return its rows, its meta row (decoded) and the pauses it took."""
    pauses: list[float] = []
    plan = plan or ShardPlan("shardId-0", TRIM_HORIZON, fake.closed, None, None)
    rows = [
        dict(zip(ROW_FIELDS, row, strict=True)) for row in read_shard(plan, options(**changes), fake, pauses.append)
    ]
    assert rows[-1]["kind"] == "meta"
    return rows[:-1], json.loads(rows[-1]["meta"]), pauses


class AcceptingKinesis:
    """A Kinesis stand-in whose PutRecords accepts every record."""

    def __init__(self) -> None:
        self.data: list[bytes] = []

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 - boto3 names
        self.data.extend(entry["Data"] for entry in Records)
        accepted = [{"SequenceNumber": str(len(self.data) + n), "ShardId": "shardId-0"} for n in range(len(Records))]
        return {"FailedRecordCount": 0, "Records": accepted}
