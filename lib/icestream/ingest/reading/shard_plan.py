"""A shard's read plan for one batch: which shards to read, from where, and only after their parents.

Made from the positions each table committed (:mod:`icestream.ingest.positions`) and the stream's
shard listing; one :class:`ShardPlan` per shard is what a read task (or the driver's read at the
tip) is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from icestream.ingest.positions import TRIM_HORIZON, after, committed_mark, earliest, is_finished, last_sequence


@dataclass(frozen=True)
class ShardPlan:
    """What one read task does in one batch."""

    shard_id: str
    start: str  # TRIM_HORIZON, AT_TIMESTAMP:..., or AFTER:... (maybe inside an aggregate)
    closed: bool  # the shard has an ending sequence number: it will get no new records
    events_committed: str | None  # records up to here (a committed_mark) are in the events table already
    rejects_committed: str | None  # records up to here (a committed_mark) are in the rejects table already
    iterator: str | None = None  # a shard iterator continuing exactly at ``start``, if one is known
    archive_committed: str | None = None  # records up to here are in the raw archive already
    # Sequence numbers of the KPL aggregates a table's position ends inside (rejects, routed tables):
    # the read task reports the ids of the new events in them (ReadStats.inside_ids).
    inside: tuple[str, ...] = ()


def _parents(shard: Mapping[str, Any]) -> list[str]:
    return [shard[key] for key in ("ParentShardId", "AdjacentParentShardId") if shard.get(key)]


def plan_shards(
    shards: Iterable[Mapping[str, Any]],
    events: Mapping[str, str],
    rejects: Mapping[str, str],
    starting_position: str,
) -> list[ShardPlan]:
    """Decide which shards to read and from where.

    A shard is read only once every parent it has (split: one; merge: two) is finished in both
    tables, so records of one partition key are always written in order. A parent that is no
    longer listed (expired past retention) counts as finished.

    Args:
        shards: ListShards records of the stream.
        events: Positions committed by the events table.
        rejects: Positions committed by the rejects table.
        starting_position: Where a shard with no position and no listed parent starts; children
            of a split or merge always start at TRIM_HORIZON so that nothing is skipped.

    Returns:
        One plan per shard to read now.
    """
    listed = {shard["ShardId"]: shard for shard in shards}

    def finished(shard_id: str) -> bool:
        return is_finished(events.get(shard_id)) and is_finished(rejects.get(shard_id))

    plans = []
    for shard_id, shard in listed.items():
        if finished(shard_id):
            continue
        parents = [parent for parent in _parents(shard) if parent in listed]
        if any(not finished(parent) for parent in parents):
            continue
        events_position, rejects_position = events.get(shard_id), rejects.get(shard_id)
        start = earliest(events_position, rejects_position)
        if start is None:
            start = events_position or rejects_position or (TRIM_HORIZON if parents else starting_position)
            if last_sequence(start) is not None:  # one table has rows, the other none: read all
                start = TRIM_HORIZON if parents else starting_position
        if is_finished(start):
            sequence = last_sequence(start)
            start = after(sequence) if sequence else TRIM_HORIZON
        plans.append(
            ShardPlan(
                shard_id=shard_id,
                start=start,
                closed="EndingSequenceNumber" in shard.get("SequenceNumberRange", {}),
                events_committed=committed_mark(events_position),
                rejects_committed=committed_mark(rejects_position),
            )
        )
    return plans
