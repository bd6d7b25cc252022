"""Several sources read at once in threads, their items handed on in one stream: a read task's shards.

A read task that holds several shards used to read them one after another: while a GetRecords call
waited (on Kinesis's network round trip, or on an emulator serving another task) the task did
nothing, and the task after it could not start. Read side by side, one thread per shard (at most
``threads`` at once), the waits overlap, while each shard is still read by one thread, in order,
within its own per-shard limits. The Python work itself (parsing, Arrow) still takes the worker's
one interpreter lock in turn: what is gained is the waiting, not more CPU.

Each source's items keep their order; items of different sources interleave. The queue between the
threads and the consumer holds at most ``threads`` items, so memory stays bounded by the threads'
chunks, whatever the consumer's pace. A source that fails ends the stream with its error once every
thread has stopped (no read is left running), as a read task of one shard would fail.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")

_DONE = object()  # a source ended


class _StoppedError(Exception):
    """The consumer went away: a source's thread stops at its next item."""


def side_by_side(
    sources: Sequence[Callable[[], Iterator[Item]]], threads: int, on_stop: Callable[[], None] | None = None
) -> Iterator[Item]:
    """Every item of every source, at most ``threads`` sources read at once.

    Args:
        sources: Each called once, in a thread of its own, to start its iterator.
        threads: At most this many sources at once; 1 (or a single source) reads them in turn, here.
        on_stop: Called when the stream ends (also early: a failure, or a consumer that stopped), before the
            threads are waited for: a source waiting on another (:class:`RecordBudget`) must stop too.

    Raises:
        The first error a source raised, once all threads have stopped.
    """
    if threads <= 1 or len(sources) <= 1:
        for source in sources:
            yield from source()
        return
    handed: queue.Queue[object] = queue.Queue(maxsize=threads)
    stop = threading.Event()

    def put(item: object) -> None:
        while not stop.is_set():
            try:
                handed.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _StoppedError

    def run(source: Callable[[], Iterator[Item]]) -> None:
        try:
            for item in source():
                put(item)
            put(_DONE)
        except _StoppedError:
            pass
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, which raises it
            if not stop.is_set():
                put(error)

    pool = ThreadPoolExecutor(max_workers=min(threads, len(sources)), thread_name_prefix="icestream-shard")
    futures = [pool.submit(run, source) for source in sources]
    try:
        ended = 0
        while ended < len(sources):
            item = handed.get()
            if item is _DONE:
                ended += 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item  # type: ignore[misc]
    finally:
        stop.set()  # a failure, or a consumer that stopped early: the threads end at their next item
        if on_stop is not None:
            on_stop()
        for future in futures:
            future.cancel()
        pool.shutdown(wait=True)


class RecordBudget:
    """What a read task's shards left of their shares, for those of its shards that hold more.

    A batch's bound is split evenly over its shards, but a stream's shards are seldom even: with a
    share each, a shard holding a little more than its share left the rest for another batch (and
    its fixed cost) while the others held less. Here each shard reads its own share first (so none
    is starved), gives what it did not need to this pool when it ends, and a shard past its share
    takes from the pool, waiting for it while other shards of the task are still reading (never
    when none is: so no thread waits for ever, nor keeps a queued shard from starting). The task
    still keeps at most the sum of its shards' shares.
    """

    def __init__(self, shards: int = 0) -> None:
        """``shards``: the task's shards when they all read at once (a thread each), so none of them
        is waited for before it starts; 0: each counts from when its read starts (threads are fewer
        than shards, and a shard waiting for records must not wait for one that needs its thread)."""
        self._left = 0
        self._reading = shards  # shards of the task reading now (not waiting here)
        self._counted = shards > 0
        self._closed = False
        self._changed = threading.Condition()

    def close(self) -> None:
        """The task's read ends early: no shard waits any longer (a shard counted may never start)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def started(self) -> None:
        """A shard's read began."""
        if not self._counted:
            with self._changed:
                self._reading += 1

    def ended(self, unused: int) -> None:
        """A shard's read ended, leaving ``unused`` records of its share."""
        with self._changed:
            self._left += max(0, unused)
            self._reading -= 1
            self._changed.notify_all()

    def take(self, wanted: int) -> int:
        """Up to ``wanted`` records, once there are any or no other shard is reading; 0: none will come."""
        with self._changed:
            self._reading -= 1
            while self._left <= 0 and self._reading > 0 and not self._closed:
                self._changed.wait()
            self._reading += 1
            granted = max(0, min(wanted, self._left))
            self._left -= granted
            return granted
