"""A producer that remembers what it sent, and the check of the tables against that ledger.

Records go out with PutRecords straight to the emulator; every answer's (shard, sequence number)
is kept, so a malformed record is known by its place in the stream and a good event by its id.
Each partition key carries a counter in ``properties["n"]``, so order per key can be checked.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from icestream.config import Settings
from icestream.ingest.reading.kafka_read import partition_id
from icestream.kinesis.clients import kinesis_client
from icestream.synthetic.malformed import MALFORMED_KINDS, malformed_payload
from tests.helpers.ingest import drain, refresh_tables
from tests.helpers.topics import send as send_to_topic


def event_document(event_id: str, user: str, counter: int) -> dict[str, Any]:
    """A valid event of ``user`` whose per-key counter is ``counter``."""
    return {
        "event_id": event_id, "user_id": user, "session_id": f"s-{user}", "event_type": "click",
        "event_ts": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "properties": {"n": str(counter)},
        "device_info": {"device_type": "mobile", "os": "iOS", "app_version": "5.3.1"},
    }  # fmt: skip


@dataclass
class Ledger:
    """Everything the producer sent and Kinesis accepted."""

    good: dict[str, str] = field(default_factory=dict)  # event id -> partition key
    malformed: set[tuple[str, str]] = field(default_factory=set)  # (shard, sequence number)
    duplicates_sent: int = 0
    records_sent: int = 0


class Workload:
    """Sends good events, malformed records (every kind in turn) and producer-style resends.

    Args:
        settings: Names the stream (the emulator's, not a fault proxy's), or the Kafka topic.
        keys: Distinct partition keys.
        bad_every: One malformed record after every this many good events (0: none).
        duplicate_every: Resend every this many-th good event (0: none).
        shape: Changes each good event's document before it is sent (its number, the document); it
            must keep ``event_id`` and ``user_id``.
        to: ``kinesis`` (PutRecords to the stream) or ``kafka`` (confluent-kafka's producer to the topic).
    """

    def __init__(
        self, settings: Settings, keys: int = 16, bad_every: int = 9, duplicate_every: int = 7,
        shape: Callable[[int, dict[str, Any]], dict[str, Any]] | None = None, to: str = "kinesis",
    ) -> None:  # fmt: skip
        self.settings = settings
        self.shape = shape
        # No silent resend: botocore retries a call whose answer was lost, and the records it had
        # already placed would land twice under sequence numbers the ledger never saw. A failed
        # call ends the workload with its cause (stop() raises it) instead of a wrong verdict.
        # botocore's max_attempts counts the retries after the first call: 0 turns them off.
        self.to = to
        self.client = kinesis_client(settings, max_attempts=0, read_timeout=120.0) if to == "kinesis" else None
        self.keys = keys
        self.bad_every = bad_every
        self.duplicate_every = duplicate_every
        self.ledger = Ledger()
        self.counters: Counter[str] = Counter()
        self._numbers = itertools.count()
        self._kinds = itertools.cycle(MALFORMED_KINDS)
        self._prefix = settings.stream_name if to == "kinesis" else settings.kafka_topic
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    def _records(self, count: int) -> list[tuple[bytes, str, str | None]]:
        """``count`` good events plus their malformed and duplicate companions: (data, key, event id or None)."""
        records: list[tuple[bytes, str, str | None]] = []
        for _ in range(count):
            number = next(self._numbers)
            user = f"user-{number % self.keys}"
            self.counters[user] += 1
            event_id = f"{self._prefix}-{number}"
            document = event_document(event_id, user, self.counters[user])
            if self.shape is not None:
                document = self.shape(number, document)
            data = json.dumps(document).encode()
            records.append((data, user, event_id))
            if self.duplicate_every and number % self.duplicate_every == 0:
                records.append((data, user, event_id))
            if self.bad_every and number % self.bad_every == 0:
                records.append((malformed_payload(next(self._kinds), document), user, None))
        return records

    def send(self, count: int) -> None:
        """Send ``count`` good events (and companions) in one PutRecords call per 500 records."""
        with self._lock:
            records = self._records(count)
            for start in range(0, len(records), 500):
                chunk = records[start : start + 500]
                for (_data, key, event_id), placed in zip(chunk, self._put(chunk), strict=True):
                    self.ledger.records_sent += 1
                    if event_id is None:
                        self.ledger.malformed.add(placed)
                    elif event_id in self.ledger.good:
                        self.ledger.duplicates_sent += 1
                    else:
                        self.ledger.good[event_id] = key

    def _put(self, chunk: list[tuple[bytes, str, str | None]]) -> list[tuple[str, str]]:
        """Send records in order; each one's (shard or partition id, sequence number or offset)."""
        if self.to == "kafka":
            placed = send_to_topic(self.settings, [(data, key) for data, key, _ in chunk])
            return [(partition_id(partition), str(offset)) for partition, offset in placed]
        answer = self.client.put_records(
            StreamName=self.settings.stream_name,
            Records=[{"Data": data, "PartitionKey": key} for data, key, _ in chunk],
        )
        # The emulator never fails a record; a retry here could reorder a key's events.
        assert answer["FailedRecordCount"] == 0, answer
        return [(placed["ShardId"], placed["SequenceNumber"]) for placed in answer["Records"]]

    def start(self, per_call: int = 20, interval: float = 0.25, max_seconds: float = 900.0) -> Workload:
        """Send ``per_call`` events every ``interval`` seconds in a thread, until stopped (bounded)."""

        def run() -> None:
            deadline = time.monotonic() + max_seconds
            try:
                while not self._stop.is_set() and time.monotonic() < deadline:
                    self.send(per_call)
                    self._stop.wait(interval)
            except BaseException as error:  # noqa: BLE001 - reported by stop()
                self.error = error

        self._thread = threading.Thread(target=run, name="reliability-producer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the background sender; raise what it failed with, if anything."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        if self.error is not None:
            raise self.error


@dataclass
class Verdict:
    """How the tables compare with the ledger."""

    events: int
    lost: int
    duplicated: int
    unexpected: int
    malformed: int
    rejects_lost: int
    rejects_duplicated: int
    order_violations: int
    missing_ids: list[str]

    @property
    def exact(self) -> bool:
        """Every good event once, every malformed record once, nothing else, order per key kept."""
        return (
            not (self.lost or self.duplicated or self.unexpected or self.rejects_lost or self.rejects_duplicated)
            and not self.order_violations
        )


def losses(event_ids: list[str], ledger: Ledger) -> tuple[int, int]:
    """(lost, duplicated): the ledger's good events missing from ``event_ids`` (a table's), and the extra copies."""
    found = Counter(event_ids)
    return len(set(ledger.good) - set(found)), sum(count - 1 for count in found.values())


def verify(spark: Any, settings: Settings, ledger: Ledger) -> Verdict:
    """Compare both tables with what was sent (event ids, and shard + sequence number of rejects)."""
    for table in (settings.table_name, settings.rejects_table_name):
        spark.catalog.refreshTable(table)  # another process may have committed since this session looked
    rows = spark.table(settings.table_name).select("event_id", "user_id", "properties", "ingest_ts", "shard_id",
                                                   "sequence_number").collect()  # fmt: skip
    found = Counter(row.event_id for row in rows)
    rejects = Counter(
        (row.shard_id, row.sequence_number)
        for row in spark.table(settings.rejects_table_name).select("shard_id", "sequence_number").collect()
    )
    expected = set(ledger.good)
    lost, duplicated = losses([row.event_id for row in rows], ledger)
    return Verdict(
        events=len(expected),
        lost=lost,
        duplicated=duplicated,
        unexpected=len(set(found) - expected) + len(set(rejects) - ledger.malformed),
        malformed=len(ledger.malformed),
        rejects_lost=len(ledger.malformed - set(rejects)),
        rejects_duplicated=sum(count - 1 for count in rejects.values()),
        order_violations=order_violations(rows),
        missing_ids=sorted(expected - set(found))[:10],
    )


def drain_and_verify(
    spark: Any, settings: Settings, ledger: Ledger, progress_file: Path, timeout: float = 600, **options: Any
) -> Verdict:
    """Ingest what is left in the stream with one ``available_now`` query, then compare the tables with ``ledger``.

    The tables are refreshed first: the campaigns commit from other processes (a killed ingest, a
    second writer), and the drain must start from the positions they committed, not from what this
    session saw last. ``options`` go to the drain (``source="kafka"``).
    """
    refresh_tables(spark, settings)
    drain(spark, settings, timeout=timeout, progress_file=progress_file, **options)
    return verify(spark, settings, ledger)


def order_violations(rows: list[Any]) -> int:
    """Pairs of consecutive events of one key written out of order.

    A later event of a key is never committed in an earlier batch (ingest time), and within one
    batch it comes from the same shard, further on.
    """
    by_key: dict[str, list[tuple[int, Any, str, int]]] = {}
    for row in rows:
        by_key.setdefault(row.user_id, []).append(
            (int(row.properties["n"]), row.ingest_ts, row.shard_id, int(row.sequence_number))
        )
    violations = 0
    for items in by_key.values():
        items.sort()
        for earlier, later in itertools.pairwise(items):
            same_batch = earlier[1] == later[1]
            if earlier[1] > later[1] or (same_batch and (earlier[2] != later[2] or earlier[3] >= later[3])):
                violations += 1
    return violations
