"""Kinesis's per-shard write limits, for the local emulator: 1,000 records and 1 MiB per second.

A real shard accepts at most 1,000 records and 1 MiB of data (payload plus partition key) per
second; a PutRecords entry beyond that is answered ``ProvisionedThroughputExceededException``
("Rate exceeded for shard ...") while the other entries of the same call succeed, and a PutRecord
call beyond it fails with that error. Producers retry those entries with backoff. The emulator
enforces the same limits (on by default; the ``emulator_write_limits`` setting turns them off), so
the producer's throttling and retries, and a backlog that builds up, show locally as on AWS.

Each shard has a budget of one second's worth that refills continuously (a token bucket): a burst
up to the limit passes at once, a sustained rate above it does not. AWS measures per second and
does not publish how it smooths bursts; this is the simplest model that keeps both limits. So a
shard at rest takes up to one second's worth at once and then the rate: over a short run the mean
is above the limit (:func:`most_bytes_admitted`), which is the burst, not a leak in the limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from icestream.limits import MAX_BYTES_PER_SHARD_SECOND, MAX_RECORDS_PER_SHARD_SECOND


def throttled_message(shard_id: str, stream_name: str, account_id: str) -> str:
    """The message Kinesis gives a throttled entry."""
    return f"Rate exceeded for shard {shard_id} in stream {stream_name} under account {account_id}."


def most_bytes_admitted(seconds: float, bytes_per_second: int = MAX_BYTES_PER_SHARD_SECOND) -> float:
    """The most bytes one shard at rest admits within ``seconds`` of a flood.

    Args:
        seconds: How long the flood has lasted.
        bytes_per_second: The shard's byte limit.

    Returns:
        One second's worth at once (the full budget), plus ``bytes_per_second`` for each second after:
        3.8 MiB offered at once take at least 2.8 s, a mean of 1.36 MiB/s over the run.
    """
    return bytes_per_second * (1 + max(0.0, seconds))


@dataclass
class _Budget:
    records: float
    data: float
    at: float


class WriteLimits:
    """Per-shard budgets of records and bytes, refilled continuously up to one second's worth."""

    def __init__(
        self,
        records_per_second: int = MAX_RECORDS_PER_SHARD_SECOND,
        bytes_per_second: int = MAX_BYTES_PER_SHARD_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
        records_per_second: Records a shard accepts per second.
        bytes_per_second: Bytes (payload plus partition key) a shard accepts per second.
        clock: Seconds, monotonic (tests pass their own).
        """
        self.records_per_second = records_per_second
        self.bytes_per_second = bytes_per_second
        self._clock = clock
        self._budgets: dict[tuple[str, str], _Budget] = {}
        self._lock = threading.Lock()  # moto's server answers requests on several threads

    def admit(self, stream: str, shard_id: str, size: int) -> bool:
        """Take one record of ``size`` bytes from the shard's budget; False (nothing taken) if it is spent."""
        now = self._clock()
        with self._lock:
            budget = self._budgets.get((stream, shard_id))
            if budget is None:
                budget = self._budgets[stream, shard_id] = _Budget(self.records_per_second, self.bytes_per_second, now)
            elapsed = max(0.0, now - budget.at)
            budget.records = min(self.records_per_second, budget.records + elapsed * self.records_per_second)
            budget.data = min(self.bytes_per_second, budget.data + elapsed * self.bytes_per_second)
            budget.at = now
            if budget.records < 1 or budget.data < size:
                return False
            budget.records -= 1
            budget.data -= size
            return True
