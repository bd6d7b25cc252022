"""Records as a KPL producer sends them: user records packed into aggregates, payloads compressed.

Like the KPL, the aggregator keeps one open aggregate per shard, so every user record lands in the
shard its own partition key maps to and each user's records stay in order: an aggregate is put with
the partition key of its first user record, which hashes into that same shard. Shards come from
``HashKeyRange`` (ListShards); without them everything goes into one sequence of aggregates (fine
for a one-shard stream or for tests). An aggregate is sent when it holds ``per_aggregate`` user
records or the next one would take it past the 1 MiB record limit; the rest when the input ends.

Compression (``gzip`` or ``zlib``) applies to each user record's payload, aggregated or not: that
is what a producer that compresses before handing records to the KPL sends.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icestream.errors import ConfigError
from icestream.kinesis.compression import CODECS, compress
from icestream.kinesis.kpl import AggregateBuilder
from icestream.limits import MAX_RECORD_BYTES
from icestream.synthetic.wire import Record

AGGREGATE_KIND = "kpl_aggregate"


def shard_of(partition_key: str, starts: Sequence[int]) -> int:
    """Index of the shard (by sorted starting hash key) that ``partition_key`` maps to (MD5, as Kinesis)."""
    hashed = int.from_bytes(hashlib.md5(partition_key.encode("utf-8")).digest(), "big")  # noqa: S324 - Kinesis's hash
    return max(0, bisect_right(starts, hashed) - 1)


def open_shard_starts(shards: Iterable[Mapping[str, Any]]) -> list[int]:
    """Sorted starting hash keys of the open shards of a ListShards answer."""
    return sorted(
        int(shard["HashKeyRange"]["StartingHashKey"])
        for shard in shards
        if "EndingSequenceNumber" not in shard.get("SequenceNumberRange", {})
    )


@dataclass
class _Open:
    builder: AggregateBuilder = field(default_factory=AggregateBuilder)
    members: list[Record] = field(default_factory=list)


@dataclass
class Aggregator:
    """Turns user records into the Kinesis records to send (see the module docstring).

    Attributes:
        per_aggregate: User records per aggregate at most (1: no aggregation).
        compression: ``gzip``, ``zlib`` or None.
        shard_starts: Starting hash keys of the open shards (:func:`open_shard_starts`), or empty.
        max_record_bytes: The Kinesis record limit (data plus partition key).
        user_records: User records taken so far.
        aggregates: Aggregates made so far.
    """

    per_aggregate: int = 1
    compression: str | None = None
    shard_starts: Sequence[int] = ()
    max_record_bytes: int = MAX_RECORD_BYTES
    user_records: int = 0
    aggregates: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.per_aggregate, int) or not self.per_aggregate >= 1:
            raise ConfigError(f"aggregate: {self.per_aggregate!r} must be a whole number of records, 1 or more.")
        if self.compression is not None and self.compression not in CODECS:
            raise ConfigError(f"compress: {self.compression!r} is not one of {', '.join(CODECS)}.")

    def records(self, records: Iterable[Record]) -> Iterator[Record]:
        """The records to send, in an order that keeps each partition key's records in order."""
        pending: dict[int, _Open] = {}
        for record in records:
            self.user_records += 1
            if self.compression is not None:
                record = record._replace(data=compress(record.data, self.compression))
            if self.per_aggregate == 1:
                yield record
                continue
            shard = shard_of(record.partition_key, self.shard_starts) if self.shard_starts else 0
            current = pending.setdefault(shard, _Open())
            if current.members and not self._fits(current, record):
                yield self._close(pending.pop(shard))
                current = pending.setdefault(shard, _Open())
            current.builder.add(record.partition_key, record.data)
            current.members.append(record)
            if len(current.members) >= self.per_aggregate:
                yield self._close(pending.pop(shard))
        for shard in sorted(pending):
            yield self._close(pending[shard])

    def _fits(self, current: _Open, record: Record) -> bool:
        outer_key = current.members[0].partition_key.encode("utf-8")
        size = current.builder.size_with(record.partition_key, record.data) + len(outer_key)
        return size <= self.max_record_bytes

    def _close(self, current: _Open) -> Record:
        first, last = current.members[0], current.members[-1]
        if len(current.members) == 1:
            return first  # one user record alone goes as it is: nothing to save by wrapping it
        self.aggregates += 1
        return Record(
            data=current.builder.build(),
            partition_key=first.partition_key,
            kind=AGGREGATE_KIND,
            event_ts=first.event_ts,
            send_at=last.send_at,
        )
