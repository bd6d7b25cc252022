"""Whether a trigger reads: Kinesis is asked from the driver first, with no Spark job.

After a read that left every shard at its tip, the next trigger asks Kinesis from the driver: one
ListShards (a split or merge, which closes shards, shows there) and GetRecords from a *probe
iterator* per shard, asking for as many records as are still needed. The probe iterators advance
past what they count, so a record is counted once however many triggers it waits; the read
still starts from the read's own iterators (or the committed positions), so a record counted and
held back is read by the batch that runs. Records held back are uncommitted in Kinesis: a stop
loses none of them.

A trigger reads when the records counted since the last batch reach ``min_records``,
or when ``max_trigger_delay`` has passed since the last batch and at least one record waits: the
trade Spark's Kafka source offers with ``minOffsetsPerTrigger`` and ``maxTriggerDelay`` (fewer,
larger files against freshness). With ``min_records`` off one record is enough, so a caught-up
stream costs a ListShards and a GetRecords of one record per shard per trigger, and no Spark job.
A changed listing, a probe iterator missing or near its expiry, a shard behind its tip
(``MillisBehindLatest`` > 0: more waits than was counted) or any error reads, which
plans and handles errors as always.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from icestream.kinesis.clients import list_shards
from icestream.limits import ITERATOR_LIFETIME_SECONDS, MAX_RECORDS_PER_GET

ITERATOR_REUSE_SECONDS = ITERATOR_LIFETIME_SECONDS - 60.0  # a margin for the batch that uses it


def listing_key(listing: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """What a listing says about which shards there are: (shard id, closed), in order."""
    return sorted(
        (shard["ShardId"], bool(shard.get("SequenceNumberRange", {}).get("EndingSequenceNumber"))) for shard in listing
    )


@dataclass
class _Probe:
    """One shard's probe: its iterator, when it was obtained, and the records it counted."""

    iterator: str
    obtained: float  # the gate's clock
    counted: int = 0


@dataclass
class _Armed:
    """What the gate knows between triggers after a read left every shard at its tip."""

    listing: list[tuple[str, bool]]
    probes: dict[str, _Probe]

    @property
    def counted(self) -> int:
        return sum(probe.counted for probe in self.probes.values())


class TriggerGate:
    """Decides at each trigger whether the batch reads (see the module docstring)."""

    def __init__(
        self,
        min_records: int | None,
        max_trigger_delay_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Set the trade between batch size and freshness.

        Args:
            min_records: Records that make a batch (None: one is enough).
            max_trigger_delay_seconds: After this long since the last batch, one record is enough.
            clock: Monotonic seconds (tests pass their own, so nothing has to wait for time to pass).
        """
        self.min_records = min_records
        self.max_trigger_delay_seconds = max_trigger_delay_seconds
        self.clock = clock
        self._armed: _Armed | None = None
        self._last_batch = clock()  # when a batch last read

    @property
    def holds_back(self) -> bool:
        """True when a batch waits for more than one record (``min_records`` is on)."""
        return self.min_records is not None

    @property
    def armed(self) -> bool:
        """True when the next trigger asks Kinesis before reading."""
        return self._armed is not None

    @property
    def counted(self) -> int:
        """Records counted since the last batch and not yet read (0 when not armed)."""
        return 0 if self._armed is None else self._armed.counted

    def read_started(self) -> None:
        """The batch reads now: the delay counts from here."""
        self._last_batch = self.clock()

    def arm(self, listing: list[dict[str, Any]], iterators: dict[str, str]) -> None:
        """Ask Kinesis first at the next trigger, after a read that left every shard at its tip.

        Args:
            listing: The ListShards records the read was planned from.
            iterators: Per shard read, the iterator its read ended with (the probes start there).
        """
        now = self.clock()
        probes = {shard: _Probe(iterator, now) for shard, iterator in iterators.items()}
        self._armed = _Armed(listing_key(listing), probes)

    def disarm(self) -> None:
        """Forget the probes: the next trigger reads."""
        self._armed = None

    def hold(self, client: Any, stream_name: str) -> bool:
        """Ask Kinesis whether this trigger may skip the read.

        Args:
            client: A boto3 Kinesis client.
            stream_name: The stream.

        Returns:
            True to skip this trigger; False to read (the gate is disarmed then).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        armed, self._armed = self._armed, None
        if armed is None:
            return False
        waited = self.clock() - self._last_batch >= self.max_trigger_delay_seconds
        target = 1 if self.min_records is None or waited else self.min_records
        try:
            if listing_key(list_shards(client, stream_name)) != armed.listing:
                return False  # a shard closed or appeared: the read path plans again
            for probe in armed.probes.values():
                if armed.counted >= target:
                    return False
                if self.clock() - probe.obtained >= ITERATOR_REUSE_SECONDS:
                    return False
                limit = min(target - armed.counted, MAX_RECORDS_PER_GET)
                answer = client.get_records(ShardIterator=probe.iterator, Limit=limit)
                following = answer.get("NextShardIterator")
                if not following or answer.get("MillisBehindLatest") not in (0, None):
                    return False  # the shard ended, or more waits than this answer counted
                probe.iterator, probe.obtained = following, self.clock()
                probe.counted += len(answer.get("Records") or ())
        except (BotoCoreError, ClientError):
            return False
        if armed.counted >= target:
            return False
        self._armed = armed
        return True

    def untouched(self) -> dict[str, str]:
        """Probe iterators of the shards where nothing was counted since the read.

        They continue from exactly where the read's own iterators do, so they may replace them
        (each GetRecords answer renews an iterator's five-minute lifetime).
        """
        if self._armed is None:
            return {}
        return {shard: probe.iterator for shard, probe in self._armed.probes.items() if probe.counted == 0}
