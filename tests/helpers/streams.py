"""Records to send, sending them to a stream, and reading a stream back with bare boto3 (no icestream reader)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any

from icestream.config import Settings
from icestream.kinesis.clients import kinesis_client, list_shards
from icestream.kinesis_source.rows import user_records as expanded_records
from icestream.producer.aggregate import Aggregator, open_shard_starts
from icestream.producer.put import produce
from icestream.synthetic.wire import Record


def event_payload(number: int, user: str, event_id: str | None = None, counter: int = 0) -> bytes:
    """A valid event (id ``ev-<number>`` unless given) of ``user``, with ``counter`` in ``properties["n"]``."""
    return json.dumps(
        {"event_id": event_id or f"ev-{number}", "user_id": user, "session_id": f"s-{user}", "event_type": "click",
         "event_ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "properties": {"n": str(counter)},
         "device_info": {"device_type": "mobile", "os": "iOS", "app_version": "5.2.1"}}
    ).encode()  # fmt: skip


def put(settings: Settings, records: list[tuple[bytes, str]]) -> list[tuple[str, str]]:
    """Send (payload, partition key) records; return each one's (shard, sequence number)."""
    client = kinesis_client(settings)
    placed = []
    for start in range(0, len(records), 500):
        chunk = records[start : start + 500]
        answer = client.put_records(
            StreamName=settings.stream_name, Records=[{"Data": data, "PartitionKey": key} for data, key in chunk]
        )
        assert answer["FailedRecordCount"] == 0
        placed.extend((entry["ShardId"], entry["SequenceNumber"]) for entry in answer["Records"])
    return placed


def mixed_records(first: int, count: int) -> tuple[list[tuple[bytes, str]], set[str], int]:
    """Good events, every tenth followed by a malformed record, every seventh resent (a retry).

    Returns:
        ``(records to put, the good event ids, how many malformed records)``.
    """
    records, good = [], set()
    malformed = 0
    for number in range(first, first + count):
        user = f"u{number % 13}"
        data = event_payload(number, user)
        records.append((data, user))
        good.add(f"ev-{number}")
        if number % 7 == 0:
            records.append((data, user))
        if number % 10 == 0:
            records.append((b'{"event_id": "broken', user))
            malformed += 1
    return records, good, malformed


def user_records(first: int, count: int) -> list[Record]:
    """Events ``ev-<first>`` onwards of five users, as the producer's records (for KPL aggregation)."""
    return [
        Record(data=event_payload(number, f"u{number % 5}", counter=number), partition_key=f"u{number % 5}",
               kind="event", event_ts=time.time(), send_at=0.0, event_id=f"ev-{number}")
        for number in range(first, first + count)
    ]  # fmt: skip


def send_aggregated(settings: Settings, records: list[Record], per_aggregate: int) -> Aggregator:
    """Send ``records`` as gzip-compressed KPL aggregates of ``per_aggregate`` user records each."""
    shards = list_shards(kinesis_client(settings), settings.stream_name)
    aggregator = Aggregator(per_aggregate, compression="gzip", shard_starts=open_shard_starts(shards))
    summary = produce(settings, aggregator.records(records), progress=False)
    assert summary.sent == summary.records > 0
    return aggregator


def read_stream(settings: Settings) -> list[dict[str, Any]]:
    """Every record in the stream, shard by shard in sequence order, each with its ``"shard"`` added.

    Bare boto3 calls (ListShards, GetShardIterator at TRIM_HORIZON, GetRecords), so what a test
    counts does not depend on the reader it checks.
    """
    client = kinesis_client(settings)
    shards: list[dict[str, Any]] = []
    answer = client.list_shards(StreamName=settings.stream_name)
    shards += answer["Shards"]
    while answer.get("NextToken"):
        answer = client.list_shards(NextToken=answer["NextToken"])
        shards += answer["Shards"]
    found = []
    for shard in shards:
        iterator = client.get_shard_iterator(
            StreamName=settings.stream_name, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            answer = client.get_records(ShardIterator=iterator, Limit=10_000)
            found.extend({"shard": shard["ShardId"], **record} for record in answer["Records"])
            if not answer["Records"] and answer.get("MillisBehindLatest", 0) == 0:
                break
            iterator = answer.get("NextShardIterator")
    return found


class PacedProducer:
    """Sends the records in order, ``per_call`` at a time every ``interval`` seconds, until all are sent.

    With ``shares``, the records are held back and sent one share at a time: :meth:`release` lets the
    next share go (paced as above), :meth:`finish` the rest. A SIGKILL campaign releases a share before
    each trial, so every trial finds unread records however slowly its process starts: a kill that
    waits for a batch's commit then always gets one (on a slow machine the whole stream was once sent
    before the last trial began, and its kill at ``after_commit`` never came).
    """

    def __init__(
        self, settings, records: list[tuple[bytes, str]], per_call: int, interval: float, shares: int | None = None
    ) -> None:
        self.settings, self.records, self.per_call, self.interval = settings, records, per_call, interval
        self.sent = 0
        self.share = -(-len(records) // shares) if shares else len(records)
        self.allowed = 0 if shares else len(records)
        self.changed = threading.Condition()
        self.hurry = threading.Event()  # set: send the rest without pausing
        self.thread = threading.Thread(target=self._run, daemon=True)

    def release(self) -> int:
        """Let the next share of the records go; return how many records are then allowed in all."""
        with self.changed:
            self.allowed = min(len(self.records), self.allowed + self.share)
            self.changed.notify_all()
            return self.allowed

    def _run(self) -> None:
        while self.sent < len(self.records):
            with self.changed:
                self.changed.wait_for(lambda: self.sent < self.allowed)
                end = min(self.sent + self.per_call, self.allowed)
            chunk = self.records[self.sent : end]
            put(self.settings, chunk)
            self.sent += len(chunk)
            self.hurry.wait(self.interval)

    def finish(self) -> None:
        self.hurry.set()
        with self.changed:
            self.allowed = len(self.records)
            self.changed.notify_all()
        self.thread.join(timeout=300)
        assert self.sent == len(self.records), "the producer did not send every record"


def stream_user_records(settings: Settings) -> Counter[tuple[str, str, int]]:
    """Every user record in the stream by (shard, sequence, sub), from a bare boto3 read."""
    found: Counter[tuple[str, str, int]] = Counter()
    for record in read_stream(settings):
        kinesis = (record["SequenceNumber"], None, record["PartitionKey"], bytes(record["Data"]))
        for _, _, sequence, sub, _ in expanded_records([kinesis], 10 * 1024 * 1024):
            found[(record["shard"], sequence, sub)] += 1
    return found
