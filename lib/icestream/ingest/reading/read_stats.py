"""What one read task did to one shard in one batch: the wire format from executor to driver.

A read task sends its :class:`ReadStats` as compact JSON in its meta row (:meth:`ReadStats.to_json`);
the driver reads it back (:meth:`ReadStats.from_json`) and puts each shard's into the batch's
progress (:mod:`icestream.ingest.progress`). Read tasks import it, so it imports nothing heavier
than the standard library.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ReadStats:
    """What one read task did to one shard in one batch (its meta row)."""

    shard_id: str
    # User records (a KPL aggregate counts each record it holds): read = good + rejected; of the
    # good ones, replayed and deduplicated are not new.
    read: int = 0
    good: int = 0
    rejected: int = 0
    replayed_events: int = 0  # at or before the events table's committed position
    replayed_rejects: int = 0
    deduplicated: int = 0  # a repeat of an event_id seen earlier in this task
    event_times_cut: int = 0  # new events whose event_ts lost digits below a microsecond (parse.cut_to_microseconds)
    lost: int = 0  # Kafka: records retention deleted before they were read, skipped (fail_on_data_loss off)
    archived: int = 0  # raw rows yielded for the archive (records past its committed position)
    # [sequence, sub, event id] of the new events inside the aggregates some table's position ends in
    # (ShardPlan.inside): rows carry no sub-sequence number, so the driver tells by id which of them
    # that table holds already (transform.done_ids).
    inside_ids: list[list] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)  # rejected records per reason
    # Schema evolution on: per new top-level field of the new events, how many values of each kind
    # (ingest.evolve.tag_value). The driver decides columns from it, with no Spark job.
    extra_kinds: dict[str, dict[str, int]] = field(default_factory=dict)
    # Where the read ended, and how far behind the tip that is.
    last_sequence: str | None = None
    last_sub: int | None = None  # the read ended inside aggregate last_sequence, after this user record
    aggregated: int = 0  # KPL aggregates among the Kinesis records read
    finished: bool = False  # a closed shard read to its end
    capped: bool = False  # stopped at its cap (its own, or its task's shared records) with records left
    millis_behind: int | None = None
    # How far behind the tip the read began: the age of the oldest record it took, when it began
    # (0 when it found nothing new; None when it made no call).
    behind_before_ms: int | None = None
    next_iterator: str | None = None  # continues after last_sequence; the next batch may reuse it
    first_arrival: float | None = None  # epoch seconds of Kinesis arrival
    last_arrival: float | None = None
    # The calls it took.
    calls: int = 0
    throttled: int = 0
    retried: int = 0
    iterator_renewals: int = 0
    read_seconds: float = 0.0
    parse_seconds: float = 0.0

    def note_arrivals(self, records: list[dict[str, Any]]) -> None:
        """Widen the arrival range by the Kinesis records of one answer that the read took."""
        arrivals = [moment for record in records if (moment := record.get("ApproximateArrivalTimestamp")) is not None]
        if not arrivals:
            return
        first, last = min(arrivals).timestamp(), max(arrivals).timestamp()
        self.first_arrival = first if self.first_arrival is None else min(self.first_arrival, first)
        self.last_arrival = last if self.last_arrival is None else max(self.last_arrival, last)

    def to_json(self) -> str:
        """The stats as compact JSON (the meta row's ``meta`` column)."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ReadStats:
        """The stats a read task sent (see :meth:`to_json`)."""
        return cls(**json.loads(text))

    def shard_report(self, dropped: int) -> dict[str, Any]:
        """This shard's entry under ``shards`` in the progress dict.

        Args:
            dropped: Its events the driver found to be duplicates (across shards, or committed).
        """
        return {
            "read": self.read,
            "good": self.good,
            "rejected": self.rejected,
            "deduplicated": self.deduplicated + dropped,
            "replayed": self.replayed_events + self.replayed_rejects,
            "last_sequence": self.last_sequence,
            "finished": self.finished,
            "millis_behind_latest": self.millis_behind,
            "millis_behind_before_read": self.behind_before_ms,
            "calls": self.calls,
            "throttled": self.throttled,
            "retried": self.retried,
            "iterator_renewals": self.iterator_renewals,
        } | ({"lost": self.lost} if self.lost else {})
