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


def client_error(code: str, operation: str = "GetRecords", status: int = 400) -> Exception:
    """A botocore ``ClientError`` with an AWS error code, as boto3 raises it."""
    from botocore.exceptions import ClientError

    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )


class FakeStream:
    """A stream of several shards in memory for the kinesis source: ListShards, DescribeStreamSummary,
    and Kinesis's iterator semantics per shard (TRIM_HORIZON, AT_TIMESTAMP, AT/AFTER_SEQUENCE_NUMBER).

    Sequence numbers grow across the stream, as Kinesis's do. A closed shard's answer that reaches its
    end has no NextShardIterator. ``faults`` are raised by the next GetRecords calls, ``iterator_faults``
    by the next GetShardIterator calls; ``page`` caps every answer below its Limit.
    """

    def __init__(self, shard_ids: tuple[str, ...] = ("shardId-0",), created: datetime | None = None) -> None:
        self.created = created or datetime(2026, 11, 21, 5, 0, tzinfo=UTC)
        self.listing: dict[str, dict[str, Any]] = {}
        self.records: dict[str, list[dict[str, Any]]] = {}
        self.closed: set[str] = set()
        self.faults: list[Exception] = []
        self.iterator_faults: list[Exception] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.page: int = MAX_RECORDS_PER_GET
        self._next_sequence = 1000
        for shard_id in shard_ids:
            self.add_shard(shard_id)

    def add_shard(self, shard_id: str, parents: tuple[str, ...] = ()) -> None:
        shard: dict[str, Any] = {"ShardId": shard_id, "SequenceNumberRange": {"StartingSequenceNumber": "0"}}
        for key, parent in zip(("ParentShardId", "AdjacentParentShardId"), parents, strict=False):
            shard[key] = parent
        self.listing[shard_id] = shard
        self.records[shard_id] = []

    def put(self, shard_id: str, data: bytes, partition_key: str = "u1", arrival: float | None = None) -> str:
        """Append one record to a shard; its sequence number (arrival: epoch seconds, default a fixed clock)."""
        sequence = str(self._next_sequence)
        self._next_sequence += 1
        moment = datetime.fromtimestamp(arrival if arrival is not None else 1_795_000_000 + int(sequence), UTC)
        self.records[shard_id].append(
            {
                "SequenceNumber": sequence,
                "Data": data,
                "PartitionKey": partition_key,
                "ApproximateArrivalTimestamp": moment,
            }
        )
        return sequence

    def put_many(self, shard_id: str, count: int) -> list[str]:
        return [self.put(shard_id, payload(number)) for number in range(count)]

    def split(self, parent: str, children: tuple[str, ...]) -> None:
        """Close ``parent`` (it gets an ending sequence number) and list ``children`` as its children."""
        self.closed.add(parent)
        last = self.records[parent][-1]["SequenceNumber"] if self.records[parent] else "0"
        self.listing[parent]["SequenceNumberRange"]["EndingSequenceNumber"] = last
        for child in children:
            self.add_shard(child, (parent,))

    def describe_stream_summary(self, StreamName: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        self.calls.append(("describe_stream_summary", {"StreamName": StreamName}))
        return {"StreamDescriptionSummary": {"StreamName": StreamName, "StreamCreationTimestamp": self.created}}

    def list_shards(self, **arguments: Any) -> dict[str, Any]:
        self.calls.append(("list_shards", arguments))
        return {"Shards": [json.loads(json.dumps(shard)) for shard in self.listing.values()]}

    def get_shard_iterator(self, **arguments: Any) -> dict[str, Any]:
        self.calls.append(("get_shard_iterator", arguments))
        if self.iterator_faults:
            raise self.iterator_faults.pop(0)
        shard_id, kind = arguments["ShardId"], arguments["ShardIteratorType"]
        records = self.records[shard_id]
        if kind == "AFTER_SEQUENCE_NUMBER":
            index = sum(1 for r in records if int(r["SequenceNumber"]) <= int(arguments["StartingSequenceNumber"]))
        elif kind == "AT_SEQUENCE_NUMBER":
            index = sum(1 for r in records if int(r["SequenceNumber"]) < int(arguments["StartingSequenceNumber"]))
        elif kind == "AT_TIMESTAMP":
            index = sum(1 for r in records if r["ApproximateArrivalTimestamp"] < arguments["Timestamp"])
        else:
            index = 0
        return {"ShardIterator": f"{shard_id}|{index}"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803 - boto3's names
        self.calls.append(("get_records", {"ShardIterator": ShardIterator, "Limit": Limit}))
        if self.faults:
            raise self.faults.pop(0)
        shard_id, _, start = ShardIterator.partition("|")
        index, records = int(start), self.records[shard_id]
        page = records[index : index + min(Limit, self.page, MAX_RECORDS_PER_GET)]
        end = index + len(page)
        at_end = end >= len(records)
        next_iterator = None if shard_id in self.closed and at_end else f"{shard_id}|{end}"
        return {"Records": page, "NextShardIterator": next_iterator, "MillisBehindLatest": 0 if at_end else 5000}

    def count(self, operation: str) -> int:
        return sum(1 for name, _ in self.calls if name == operation)
