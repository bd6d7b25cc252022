"""One shard's GetRecords loop for the source: to a cap (a batch's end is fixed so), or to a known end (a replay).

A Kinesis shard has no "latest sequence number" to ask for: only GetRecords shows what a shard
holds. So the end of every batch is fixed by reading: at ``latestOffset`` the driver reads each
readable shard from the batch's start, up to ``maxFetchRecordsPerShard`` records or the tip, and
the batch ends after the last record it got (:func:`fetch_to_cap`). Those records go to the
executors with the batch's partitions, so a record is fetched once. A batch replayed after a
restart has its end in Spark's offset log but no records: the executor reads the shard again from
the start to exactly that record (:func:`fetch_to_end`), so a replay reads the same records.

Both keep to Kinesis's per-shard limit (five calls per second and API), repeat throttled and
transient calls with jittered backoff, and renew an expired iterator from the last record read.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from icestream.errors import IngestError, ShardReadError
from icestream.ingest import positions as pos
from icestream.ingest.call_retry import error_code, is_transient_call
from icestream.limits import GET_CALLS_PER_SECOND, MAX_RECORDS_PER_GET

# A fetched record: (sequence number, arrival in epoch seconds or None, partition key, data).
Record = tuple[str, float | None, str, bytes]

MIN_CALL_INTERVAL = 1 / GET_CALLS_PER_SECOND
MAX_ATTEMPTS = 8  # consecutive failed calls before the read gives up
MAX_EMPTY_CALLS = 50  # answers with no record and no tip, in a row (a shard's trimmed stretch) before a probe ends


@dataclass
class Pacer:
    """When each shard last called each API: a shard gets at most five calls a second per API."""

    last: dict[tuple[str, str], float] = field(default_factory=dict)
    sleep: Callable[[float], None] = time.sleep

    def wait(self, shard_id: str, operation: str) -> None:
        key = (shard_id, operation)
        wait = MIN_CALL_INTERVAL - (time.monotonic() - self.last.get(key, -MIN_CALL_INTERVAL))
        if wait > 0:
            self.sleep(wait)
        self.last[key] = time.monotonic()


@dataclass
class Fetched:
    """What one shard's fetch got and where it ended."""

    shard_id: str
    start: str
    records: list[Record]
    end: str  # the position after the last record (the start when none), or END:<seq> for a closed shard's end
    next_iterator: str | None  # continues exactly at ``end`` (None: unknown, or the shard ended)
    millis_behind: int | None  # MillisBehindLatest of the last answer
    calls: int = 0
    retried: int = 0


def _record(record: dict[str, Any]) -> Record:
    """A GetRecords record as the source keeps it (arrival as epoch seconds)."""
    arrival = record.get("ApproximateArrivalTimestamp")
    if arrival is not None:
        arrival = arrival.timestamp() if hasattr(arrival, "timestamp") else float(arrival)
    return record["SequenceNumber"], arrival, record.get("PartitionKey", ""), bytes(record["Data"])


class _Loop:
    def __init__(self, client: Any, stream_name: str, shard_id: str, start: str, pacer: Pacer) -> None:
        self.client = client
        self.stream_name = stream_name
        self.shard_id = shard_id
        self.start = start
        self.pacer = pacer
        self.failures = 0
        self.retried = 0
        self.calls = 0
        self.last_sequence = pos.last_sequence(start)

    def _retry(self, error: Exception) -> None:
        """Back off before repeating a transient failure; give up after MAX_ATTEMPTS in a row."""
        self.failures += 1
        self.retried += 1
        if self.failures >= MAX_ATTEMPTS:
            raise ShardReadError(
                f"shard {self.shard_id}: {self.failures} failures in a row, last {type(error).__name__}: {error}"
            ) from error
        ceiling = min(5.0, 0.1 * 2**self.failures)
        self.pacer.sleep(random.uniform(ceiling / 2, ceiling))  # noqa: S311 - jitter, not cryptography

    def iterator(self) -> str:
        position = pos.after(self.last_sequence) if self.last_sequence else self.start
        while True:
            self.pacer.wait(self.shard_id, "GetShardIterator")
            try:
                answer = self.client.get_shard_iterator(
                    StreamName=self.stream_name, ShardId=self.shard_id, **pos.iterator_arguments(position)
                )
            except Exception as error:
                if error_code(error) == "ResourceNotFoundException":
                    raise IngestError(
                        f"Kinesis stream {self.stream_name} or its shard {self.shard_id} no longer exists: "
                        "a deleted stream cannot be read on; start the query again with a new checkpoint"
                    ) from None
                if not is_transient_call(error):
                    raise
                self._retry(error)
                continue
            self.failures = 0
            return str(answer["ShardIterator"])

    def get(self, iterator: str, limit: int) -> dict[str, Any] | None:
        """One GetRecords answer, or None when the iterator expired (the caller asks for a new one)."""
        while True:
            self.pacer.wait(self.shard_id, "GetRecords")
            self.calls += 1
            try:
                answer: dict[str, Any] = self.client.get_records(ShardIterator=iterator, Limit=limit)
            except Exception as error:
                if error_code(error) == "ExpiredIteratorException":
                    return None
                if not is_transient_call(error):
                    raise
                self._retry(error)
                continue
            self.failures = 0
            return answer


def fetch_to_cap(
    client: Any,
    stream_name: str,
    shard_id: str,
    start: str,
    cap: int,
    pacer: Pacer,
    iterator: str | None = None,
    closed: bool = False,
) -> Fetched:
    """Read a shard from ``start`` up to ``cap`` records, the tip, or a closed shard's end (a batch's end is fixed so).

    Args:
        client: A boto3 Kinesis client.
        stream_name: The stream.
        shard_id: The shard.
        start: Its position (``ingest.positions``): TRIM_HORIZON, AT_TIMESTAMP:<s> or AFTER:<seq>.
        cap: At most this many records.
        pacer: The per-shard call pacing, kept across calls.
        iterator: An iterator that continues exactly at ``start`` (saves a GetShardIterator call).
        closed: The shard has an ending sequence number (ListShards): at its tip with nothing left, it has
            ended, whether or not the answer still carries an iterator (the emulator's does).
    """
    loop = _Loop(client, stream_name, shard_id, start, pacer)
    records: list[Record] = []
    current = iterator or loop.iterator()
    millis_behind: int | None = None
    empty = 0
    finished = False
    next_iterator: str | None = current
    while len(records) < cap:
        answer = loop.get(current, min(MAX_RECORDS_PER_GET, cap - len(records)))
        if answer is None:
            current = loop.iterator()
            continue
        got = answer.get("Records", [])
        for record in got:
            records.append(_record(record))
        if got:
            loop.last_sequence = got[-1]["SequenceNumber"]
        millis_behind = answer.get("MillisBehindLatest")
        next_iterator = answer.get("NextShardIterator")
        if next_iterator is None or (closed and not got and millis_behind in (0, None)):
            finished = True  # a closed shard read to its end
            break
        current = next_iterator
        if millis_behind in (0, None):
            break  # at the tip: what arrives next is the next batch's
        empty = 0 if got else empty + 1
        if empty >= MAX_EMPTY_CALLS:
            break
    end = pos.ended(loop.last_sequence) if finished else (pos.after(records[-1][0]) if records else start)
    return Fetched(
        shard_id,
        start,
        records,
        end,
        None if finished else next_iterator,
        millis_behind,
        calls=loop.calls,
        retried=loop.retried,
    )


def fetch_to_end(client: Any, stream_name: str, shard_id: str, start: str, end: str, pacer: Pacer) -> list[Record]:
    """Read a shard from ``start`` to exactly the last record of ``end`` (a replayed batch's records).

    Raises:
        IngestError: When the shard no longer holds the batch's records (past the stream's retention),
            or the stream was deleted: a replay never skips records silently.
    """
    until = pos.last_sequence(end)
    if until is None:
        return []
    stop = pos.sequence_key(until)
    loop = _Loop(client, stream_name, shard_id, start, pacer)
    records: list[Record] = []
    current = loop.iterator()
    empty = 0
    while True:
        answer = loop.get(current, MAX_RECORDS_PER_GET)
        if answer is None:
            current = loop.iterator()
            continue
        got = answer.get("Records", [])
        for record in got:
            sequence = record["SequenceNumber"]
            if pos.sequence_key(sequence) > stop:
                break
            records.append(_record(record))
            loop.last_sequence = sequence
            if sequence == until:
                return records
        if got and pos.sequence_key(got[-1]["SequenceNumber"]) > stop:
            break
        following = answer.get("NextShardIterator")
        empty = 0 if got else empty + 1
        if following is None or (answer.get("MillisBehindLatest") in (0, None) and not got) or empty >= MAX_EMPTY_CALLS:
            break
        current = following
    raise IngestError(
        f"shard {shard_id} of {stream_name} no longer holds the records of the batch being replayed "
        f"({start} to {end}): they are past the stream's retention. Nothing was skipped; start the query "
        "again from a new checkpoint with startingPosition trim_horizon or the table's positions"
    )
