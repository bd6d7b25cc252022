"""Dedupe over every event time the parser accepts (years 1 to 9999), against a model table.

The index runs its real ``duplicates`` / ``add`` / eviction / range-load logic; only the table is a
list in memory (:class:`ModelIndex`), so hypothesis can try thousands of batch sequences without
Spark. The Spark side of a load (its bounds as microseconds) is tested in
tests/integration/test_dedupe_time_range.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from icestream.ingest import dedupe
from icestream.timestamps import from_micros, to_micros

HOUR = 3_600_000_000
LOOKBACK = HOUR
FIRST = to_micros(datetime(1, 1, 1, tzinfo=UTC))
LAST = to_micros(datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC))
NOW = to_micros(datetime(2026, 11, 26, 21, 0, tzinfo=UTC))


class ModelIndex(dedupe.CommittedIndex):
    """A committed index whose table is ``rows`` (event id, event time): no Spark, same logic."""

    def __init__(self) -> None:
        super().__init__("lake.ns.model", "query-1", LOOKBACK)
        self.rows: list[tuple[str, int]] = []
        self.snapshot_id = 1  # known, and in step with the model table (no other writer)

    def sync(self, spark: object) -> None:
        """Only this query writes the model table: the index stays valid."""

    def _load(self, spark: object, start: int, end: int) -> None:
        self.loads += 1
        inside = [(event_id, time) for event_id, time in self.rows if start <= time < end]
        self.loaded_rows += len(inside)
        if inside:
            blob = b"".join(dedupe.digest(event_id) for event_id, _ in inside)
            pairs = np.frombuffer(blob, dtype="<i8").reshape(-1, 2)
            self._extend(pairs[:, 0].copy(), pairs[:, 1].copy(), np.array([time for _, time in inside], dtype=np.int64))

    def ingest(self, events: list[tuple[str, int, int]]) -> int:
        """Dedupe and commit one batch of ``(event id, event time, arrival)``; return how many were written."""
        packer = dedupe.Packer()
        for event_id, time, arrival in events:
            packer.add(event_id, from_micros(time), from_micros(arrival))
        batch = dedupe.Batch.unpack({"shardId-0": packer.pack()})
        dropped = dedupe.duplicates(self, batch, None)  # type: ignore[arg-type]
        kept = np.setdiff1d(np.arange(len(batch), dtype=np.int64), dropped)
        self.rows += [(events[row][0], events[row][1]) for row in kept.tolist()]
        self.add(batch, kept)
        return len(kept)


ANY_TIME = st.integers(min_value=FIRST, max_value=LAST)


@st.composite
def batches(draw: st.DrawFn) -> list[list[tuple[str, int, int]]]:
    """Batches arriving in order from NOW on, each event any number of times (the producer's retries).

    An event has any time of years 1 to 9999, the same in every copy.
    """
    pool: dict[str, int] = {}
    arrival, sequence = NOW, []
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        arrival += draw(st.integers(min_value=0, max_value=3 * HOUR))
        events = []
        for _ in range(draw(st.integers(min_value=1, max_value=6))):
            event_id = draw(st.sampled_from(sorted(pool)) | st.text("abcdef", min_size=1, max_size=3)) if pool else "a"
            time = pool.setdefault(event_id, draw(ANY_TIME))
            events.append((event_id, time, arrival))
        sequence.append(events)
    return sequence


@given(batches())
def test_every_event_is_written_once_whatever_its_time(sequence: list[list[tuple[str, int, int]]]) -> None:
    index = ModelIndex()
    for events in sequence:
        index.ingest(events)
    written = [event_id for event_id, _ in index.rows]
    assert sorted(written) == sorted(set(written)), "an event was written twice"
    assert set(written) == {event_id for events in sequence for event_id, _, _ in events}


TIMELY_OR_LATER = st.one_of(
    st.integers(min_value=0, max_value=LOOKBACK // 2).map(lambda behind: -behind),  # on time, as arrivals go
    st.integers(min_value=0, max_value=LAST - NOW).map(lambda ahead: ahead),  # any time up to 9999
)


@given(st.data())
def test_events_dated_after_their_arrival_never_make_the_index_read_the_table_again(data: st.DataObject) -> None:
    index = ModelIndex()
    arrival = NOW
    index.ingest([("first", NOW, NOW)])
    for _ in range(data.draw(st.integers(min_value=2, max_value=8))):
        arrival += data.draw(st.integers(min_value=0, max_value=3 * HOUR))
        offsets = data.draw(st.lists(TIMELY_OR_LATER, min_size=1, max_size=5))
        # Never before the first batch's time: an event older than the index holds is read from
        # the table by design (a late event), which is not what this test is about.
        times = [min(max(arrival + offset, NOW), LAST) for offset in offsets]
        events = [(f"ev-{arrival}-{n}", time, arrival) for n, time in enumerate(times)]
        index.ingest(events)
        timely = [(f"on-time-{arrival}", arrival, arrival)]  # what a healthy producer sends beside them
        index.ingest(timely)
    assert index.loads == 1, "an event's claimed time evicted ids that arrived in time"


def test_a_far_future_event_stays_and_the_rest_are_kept() -> None:
    index = ModelIndex()
    index.ingest([("now", NOW, NOW), ("future", LAST, NOW)])
    index.ingest([("later", NOW + HOUR, NOW + HOUR)])
    assert len(index) == 3
    assert index.high_water == NOW + HOUR
    assert index.ingest([("future", LAST, NOW + 2 * HOUR), ("now", NOW, NOW + 2 * HOUR)]) == 0
    assert index.loads == 1


def test_without_an_arrival_the_drivers_clock_caps_the_mark() -> None:
    index = ModelIndex()
    batch = dedupe.Batch.unpack({"shardId-0": _packed_without_arrival("future", LAST)})
    index.add(batch, np.arange(1))
    assert index.high_water <= to_micros(datetime.now(UTC) + timedelta(seconds=1))


def _packed_without_arrival(event_id: str, time: int) -> bytes:
    packer = dedupe.Packer()
    packer.add(event_id, from_micros(time), None)
    return packer.pack()
