"""A read task's shards read side by side: every item once, each source in order, errors after all stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from icestream.ingest.reading.threads import side_by_side


def counting(name: str, count: int, gate: threading.Event | None = None) -> Iterator[tuple[str, int]]:
    for number in range(count):
        if gate is not None:
            gate.wait(5)
        yield name, number


@pytest.mark.parametrize("threads", [1, 2, 8])
def test_every_item_once_and_each_source_in_order(threads: int) -> None:
    sources = [lambda name=name: counting(name, 50) for name in "abcde"]
    items = list(side_by_side(sources, threads))
    assert sorted(items) == sorted((name, number) for name in "abcde" for number in range(50))
    for name in "abcde":
        assert [number for source, number in items if source == name] == list(range(50))


def test_sources_are_read_at_the_same_time() -> None:
    # Each source waits until all three have started: read in turn, the first would wait for ever.
    started = threading.Barrier(3, timeout=5)

    def source(name: str) -> Iterator[str]:
        started.wait()
        yield name

    assert sorted(side_by_side([lambda name=name: source(name) for name in "xyz"], threads=3)) == ["x", "y", "z"]


def test_no_more_than_threads_sources_at_once() -> None:
    running, most = 0, 0
    lock = threading.Lock()

    def source() -> Iterator[int]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.01)
        yield 1
        with lock:
            running -= 1

    assert sum(side_by_side([source] * 12, threads=3)) == 12
    assert 1 <= most <= 3


def test_a_failing_source_raises_once_every_thread_has_stopped() -> None:
    ended: list[str] = []

    def slow() -> Iterator[int]:
        try:
            for number in range(1000):
                time.sleep(0.001)
                yield number
        finally:
            ended.append("slow")

    def failing() -> Iterator[int]:
        yield 1
        raise RuntimeError("shard read failed")

    with pytest.raises(RuntimeError, match="shard read failed"):
        list(side_by_side([slow, failing], threads=2))
    assert ended == ["slow"]  # stopped, not left reading


def test_a_consumer_that_stops_early_stops_the_threads() -> None:
    made: list[int] = []

    def endless() -> Iterator[int]:
        number = 0
        while True:
            made.append(number)
            yield number
            number += 1

    stream = side_by_side([endless, endless], threads=2)
    assert next(stream) == 0
    stream.close()  # returns once the threads have ended
    assert len(made) <= 2 * 3  # each thread at most an item queued, one waiting and one being made
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("icestream-shard")]


def test_a_shard_waiting_for_records_stops_waiting_when_the_read_ends_early() -> None:
    from icestream.ingest.reading.threads import RecordBudget

    budget = RecordBudget(shards=2)  # counted before they start: the other may never start
    granted: list[int] = []
    waiter = threading.Thread(target=lambda: granted.append(budget.take(10)))
    waiter.start()
    for _ in range(500):  # until it waits (it counts itself out while it does)
        if budget._reading == 1:
            break
        time.sleep(0.01)
    budget.close()  # what side_by_side's on_stop does when the task's read fails or is stopped
    waiter.join(timeout=30)
    assert not waiter.is_alive(), "a closed budget releases its waiters"
    assert granted == [0]


def test_side_by_side_calls_on_stop_before_it_waits_for_its_threads() -> None:
    stopped = threading.Event()

    def waits() -> Iterator[int]:
        assert stopped.wait(30), "on_stop came after the threads were waited for"
        yield 1

    def fails() -> Iterator[int]:
        raise RuntimeError("shard read failed")
        yield 0  # a generator

    with pytest.raises(RuntimeError, match="shard read failed"):
        list(side_by_side([waits, fails], threads=2, on_stop=stopped.set))
    assert stopped.is_set()
