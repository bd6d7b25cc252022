"""The committed-id index and the batch arithmetic of dedupe (the Spark parts are integration tests)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from icestream.ingest import dedupe
from icestream.timestamps import to_micros

T0 = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
HOUR = 3_600_000_000


def packed(*events: tuple[str, int, int]) -> bytes:
    """Pack (event_id, minutes after T0 of event time, seconds after T0 of arrival)."""
    packer = dedupe.Packer()
    for event_id, minute, arrival in events:
        packer.add(event_id, T0 + timedelta(minutes=minute), T0 + timedelta(seconds=arrival))
    return packer.pack()


def index(lookback_hours: float = 1.0) -> dedupe.CommittedIndex:
    built = dedupe.CommittedIndex("lake.ns.t", "query-1", int(lookback_hours * HOUR))
    built.snapshot_id = dedupe.NO_SNAPSHOT  # as if loaded from an empty table
    built.low = -dedupe.UNBOUNDED
    return built


def test_digests_are_stable_and_16_bytes() -> None:
    assert dedupe.digest("ev-1") == dedupe.digest("ev-1")
    assert dedupe.digest("ev-1") != dedupe.digest("ev-2")
    assert len(dedupe.digest("\ud800 lone surrogate")) == dedupe.DIGEST_BYTES


def test_micros_are_exact_and_treat_naive_as_utc() -> None:
    moment = datetime(2262, 4, 11, 23, 47, 16, 854775, tzinfo=UTC)
    assert to_micros(moment) == 9223372036854775
    assert to_micros(moment.replace(tzinfo=None)) == to_micros(moment)


def test_pack_and_unpack_round_trip_with_ordinals_per_shard() -> None:
    batch = dedupe.Batch.unpack({"shardId-1": packed(("a", 0, 1), ("b", 5, 2)), "shardId-0": packed(("c", 1, 0))})
    assert batch.shard_ids == ("shardId-0", "shardId-1")
    assert len(batch) == 3
    assert batch.ordinals.tolist() == [0, 0, 1]
    assert batch.shards.tolist() == [0, 1, 1]
    assert batch.times[2] - batch.times[1] == 5 * 60_000_000
    assert batch.keys(np.array([0, 2])) == {"shardId-0:0", "shardId-1:1"}


def test_packed_times_are_the_exact_micros_of_every_kind_of_datetime() -> None:
    from datetime import timezone

    moments = [
        T0,
        datetime(2026, 11, 21, 7, 30, 0, 123456, tzinfo=timezone(timedelta(hours=1, minutes=30))),
        datetime(2026, 11, 21, 6, 0, 0, 1),  # naive: taken as UTC
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ]
    packer = dedupe.Packer()
    for number, moment in enumerate(moments):
        packer.add(f"e{number}", moment, None if number == 1 else moment)
    batch = dedupe.Batch.unpack({"shardId-0": packer.pack()})
    assert batch.times.tolist() == [to_micros(moment) for moment in moments]
    assert batch.arrivals.tolist() == [0 if number == 1 else to_micros(m) for number, m in enumerate(moments)]
    assert batch.hi.tolist() == [int.from_bytes(dedupe.digest(f"e{n}")[:8], "little", signed=True) for n in range(5)]


def test_an_empty_packer_packs_to_nothing() -> None:
    assert dedupe.Packer().pack() == b""


def test_a_torn_blob_is_refused() -> None:
    with pytest.raises(ValueError, match="multiple of 32"):
        dedupe.Batch.unpack({"shardId-0": packed(("a", 0, 0))[:-1]})


def test_the_copy_that_arrived_first_is_kept_across_shards() -> None:
    batch = dedupe.Batch.unpack(
        {"shardId-0": packed(("x", 0, 9), ("y", 0, 1)), "shardId-1": packed(("x", 0, 3), ("x", 0, 4))}
    )
    later = batch.later_copies(np.arange(len(batch)))
    assert batch.keys(later) == {"shardId-0:0", "shardId-1:1"}  # x arrived first in shardId-1 at 3 s


def test_ties_on_arrival_go_to_the_lower_shard_then_the_earlier_position() -> None:
    batch = dedupe.Batch.unpack({"shardId-1": packed(("x", 0, 5)), "shardId-0": packed(("x", 0, 5), ("x", 0, 5))})
    assert batch.keys(batch.later_copies(np.arange(len(batch)))) == {"shardId-0:1", "shardId-1:0"}


def test_committed_ids_are_found_only_inside_the_lookback_window() -> None:
    committed = index(lookback_hours=1)
    old = dedupe.Batch.unpack({"shardId-0": packed(("early", 0, 0), ("late", 180, 0))})
    committed.add(old, np.arange(len(old)))
    batch = dedupe.Batch.unpack({"shardId-0": packed(("early", 150, 0), ("late", 170, 0), ("new", 170, 0))})
    start, end = committed.window(batch)
    found = committed.committed(batch, start, end)
    # "early" was committed at minute 0: more than an hour before this batch's first event (150).
    assert batch.keys(found) == {"shardId-0:1"}


def test_a_shared_first_half_is_not_a_match() -> None:
    committed = index()
    batch = dedupe.Batch.unpack({"shardId-0": packed(("a", 0, 0), ("b", 0, 0))})
    # Forge an index entry with a's first 8 bytes but other last 8 bytes: not the same id.
    committed.hi = np.array([batch.hi[0]], dtype=np.int64)
    committed.lo = np.array([batch.lo[0] ^ 1], dtype=np.int64)
    committed.times = np.array([batch.times[0]], dtype=np.int64)
    start, end = committed.window(batch)
    assert len(committed.committed(batch, start, end)) == 0


def test_old_entries_are_evicted_two_lookbacks_behind_the_high_water_mark() -> None:
    committed = index(lookback_hours=1)
    first = dedupe.Batch.unpack({"shardId-0": packed(("a", 0, 0), ("b", 60, 3600))})
    committed.add(first, np.arange(2))
    assert len(committed) == 2
    later = dedupe.Batch.unpack({"shardId-0": packed(("c", 150, 9000))})
    committed.add(later, np.arange(1))
    assert len(committed) == 2, "a (minute 0) is more than two hours behind c (minute 150)"
    assert committed.low == committed.high_water - 2 * HOUR
    committed.reset()
    assert len(committed) == 0
    assert committed.snapshot_id is None


class _FakeSpark:
    """Just enough of a session for the paths that need no table."""


def test_duplicates_combine_committed_ids_and_later_copies() -> None:
    committed = index()
    committed.add(dedupe.Batch.unpack({"shardId-0": packed(("seen", 0, 0))}), np.arange(1))
    batch = dedupe.Batch.unpack(
        {"shardId-0": packed(("seen", 1, 5), ("twice", 1, 6)), "shardId-1": packed(("twice", 1, 2), ("fresh", 1, 1))}
    )
    committed.sync = lambda spark: None  # type: ignore[method-assign]  # in step with the table: nothing to read
    drop = dedupe.duplicates(committed, batch, _FakeSpark())  # type: ignore[arg-type]
    assert batch.keys(drop) == {"shardId-0:0", "shardId-0:1"}


def test_an_empty_batch_drops_nothing() -> None:
    assert len(dedupe.duplicates(index(), dedupe.Batch.unpack({}), _FakeSpark())) == 0  # type: ignore[arg-type]


def test_the_window_stays_inside_int64_at_both_ends_of_the_range() -> None:
    committed = index(lookback_hours=24 * 365 * 300_000)  # three hundred thousand years: past int64
    first, last = datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    packer = dedupe.Packer()
    for event_id, moment in (("zero", first), ("max", last)):
        packer.add(event_id, moment, T0)
    batch = dedupe.Batch.unpack({"shardId-0": packer.pack()})
    committed.add(batch, np.arange(2))
    start, end = committed.window(batch)
    assert (start, end) == (-dedupe.UNBOUNDED, dedupe.UNBOUNDED - 1)
    assert batch.keys(committed.committed(batch, start, end)) == {"shardId-0:0", "shardId-0:1"}
