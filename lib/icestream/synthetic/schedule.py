"""When generated records happen and leave: event-time order in, send-time order out, an exact budget.

The generator creates records ahead of time, one *unit* at a time: a clean event together with the
duplicate and the malformed record drawn for it, or one record of its own (an oversized record), or
none (an event a drop anomaly removed, kept as a marker so that it is counted). A unit *happens* at its
event time. :class:`Schedule` lets units happen in event-time order, and releases their records in
send-time order, so a late event leaves after newer ones.

An exact number of records (``GeneratorConfig.records``) is met in one of two ways:

- **Budget** (an open window, live): units happen until the budget is spent; the unit that spends it
  is cut to fit (its event first, then its duplicate, then its malformed record). Nothing happens after
  that instant, and records of units that did happen but would leave later (late events, duplicates)
  leave at that instant instead: still after newer events, never dropped.
- **Thinning** (a fixed window, backfill): the window is generated a little denser, a dry pass counts
  each unit's records, and :func:`choose_dropped` picks whole units at random to leave out so that
  exactly the budget remains, spread over the whole window. Thinning at random keeps every rate's shape
  (an anomaly stays the same multiple of its baseline).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

from icestream.errors import ConfigError
from icestream.synthetic.wire import Record

# Records per session vary (sessions of one to many events), so a window's record count varies more
# than a Poisson count: its variance is about this many times its mean (E[X^2] / E[X] for the funnel).
_COUNT_DISPERSION = 12.0


class Schedule:
    """Units in event-time order in, records in send-time order out, within an optional budget.

    Args:
        budget: Records to let happen at most (None: no limit).
        dropped: Numbers of units to leave out (thinning; see :func:`choose_dropped`).
        tags: Where to count the tags of units that happen (e.g. the generator's ``counts``).
    """

    def __init__(
        self, budget: int | None = None, dropped: frozenset[int] = frozenset(), tags: Counter[str] | None = None
    ) -> None:
        self.budget = budget
        self.dropped = dropped
        self.tags: Counter[str] = tags if tags is not None else Counter()
        self.units = 0  # units added so far; a unit's number is its place in this order
        self.admitted = 0  # records that happened
        self.stopped_at: float | None = None  # event time at which the budget was spent
        self._pending: list[tuple[float, int, list[tuple[int, Record]], str | None]] = []
        self._due: list[tuple[float, int, Record]] = []

    def waiting(self, before: float) -> bool:
        """True if a unit is due to happen, or a record due to leave, before ``before`` (a cheap check)."""
        return bool((self._pending and self._pending[0][0] < before) or (self._due and self._due[0][0] < before))

    @property
    def full(self) -> bool:
        """True once the budget is spent: nothing more happens."""
        return self.stopped_at is not None

    def add(
        self, event_ts: float, records: list[tuple[int, Record]], tag: str | None = None, *, now: bool = False
    ) -> Record | None:
        """Add a unit: its records (each with its creation sequence number, the tie-break) and a tag.

        Args:
            event_ts: When it happens.
            records: Its records, numbered.
            tag: Counted in ``tags`` when the unit happens (e.g. ``anomaly_extra``).
            now: It happens now (the caller's present is ``event_ts``, every earlier unit was added):
                it is let happen at once instead of waiting for :meth:`admit`.

        Returns:
            Its record, when the unit happened now, is one on-time record and nothing is due before it:
            it can leave at once, without a trip through the queue (the common case, kept cheap).
        """
        number = self.units
        self.units += 1
        if not now:
            heapq.heappush(self._pending, (event_ts, number, records, tag))
            return None
        records = self._happen(event_ts, number, records, tag)
        if len(records) == 1 and records[0][1].send_at <= event_ts and not (self._due and self._due[0][0] <= event_ts):
            return records[0][1]
        for sequence, record in records:
            heapq.heappush(self._due, (record.send_at, sequence, record))
        return None

    def _happen(
        self, event_ts: float, number: int, records: list[tuple[int, Record]], tag: str | None
    ) -> list[tuple[int, Record]]:
        """Let a unit happen within the budget; return the records that do."""
        if number in self.dropped or self.full:
            return []
        if self.budget is not None:
            records = records[: self.budget - self.admitted]
            if self.admitted + len(records) == self.budget:
                self.stopped_at = event_ts
        self.admitted += len(records)
        if tag:
            self.tags[tag] += 1
        return records

    def admit(self, before: float = math.inf) -> None:
        """Let the waiting units with event time before ``before`` happen, in event-time order."""
        while self._pending and self._pending[0][0] < before and not self.full:
            event_ts, number, records, tag = heapq.heappop(self._pending)
            for sequence, record in self._happen(event_ts, number, records, tag):
                heapq.heappush(self._due, (record.send_at, sequence, record))
        if self.full:
            self._pending.clear()  # what comes after the budget never happens

    def release(self, before: float) -> Iterator[Record]:
        """Yield the records that happened and leave before ``before``, in send order."""
        while self._due and self._due[0][0] < before:
            yield heapq.heappop(self._due)[2]

    def drain(self) -> Iterator[Record]:
        """Let everything left happen (within the budget) and yield every record still to leave.

        After the budget was spent, a record due later leaves at the instant it was spent.
        """
        self.admit()
        stop = self.stopped_at
        while self._due:
            record = heapq.heappop(self._due)[2]
            yield record if stop is None or record.send_at <= stop else record._replace(send_at=stop)


def thinning_plan(
    records: int, unit_sizes: Callable[[float], list[int]], rng: random.Random
) -> tuple[float, frozenset[int]]:
    """How much denser to generate a fixed window, and which units to leave out, to keep ``records``.

    The first density is three standard deviations of the window's record count above its mean, so a
    dry pass almost always finds enough records; when it does not, the next pass is denser.

    Args:
        records: Records to keep.
        unit_sizes: A dry pass at a density: each unit's record count, negative for a unit never left out.
        rng: The thinning's random source.

    Returns:
        The density and the numbers of the units to leave out.

    Raises:
        ConfigError: If no density up to a few passes gives enough records.
    """
    density = 1.0 + 3.0 * math.sqrt(_COUNT_DISPERSION / records)
    for _ in range(8):
        sizes = unit_sizes(density)
        total = sum(abs(size) for size in sizes)
        if total >= records:
            fixed = frozenset(number for number, size in enumerate(sizes) if size < 0)
            return density, choose_dropped([abs(size) for size in sizes], records, fixed, rng)
        density *= 1.2 * records / max(1, total)
    raise ConfigError(f"records: could not generate {records} records in the window; lower the number.")


def choose_dropped(sizes: Sequence[int], keep: int, fixed: frozenset[int], rng: random.Random) -> frozenset[int]:
    """Pick whole units at random to leave out, so that exactly ``keep`` records remain.

    Args:
        sizes: Records of each unit, by unit number (from a dry pass).
        keep: Records to keep.
        fixed: Units never to leave out (records asked for by count, such as oversized ones).
        rng: The thinning's random source (seeded, so a seed reproduces the same records).

    Returns:
        The numbers of the units to leave out.

    Raises:
        ConfigError: If the units hold fewer than ``keep`` records, or no choice of whole units leaves
            exactly ``keep`` (cannot happen while single-record units are the rule).
    """
    excess = sum(sizes) - keep
    if excess < 0:
        raise ConfigError(f"the window holds {sum(sizes)} records, fewer than the {keep} asked for.")
    order = [number for number, size in enumerate(sizes) if size and number not in fixed]
    rng.shuffle(order)
    dropped = set()
    for number in order:
        if not excess:
            break
        if sizes[number] <= excess:
            dropped.add(number)
            excess -= sizes[number]
    if excess:
        raise ConfigError(f"cannot leave out exactly {sum(sizes) - keep} records with whole units.")
    return frozenset(dropped)
