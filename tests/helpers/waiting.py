"""Waiting for a condition: poll until it holds, and fail loudly, saying what was awaited, when it does not."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, interval: float = 0.1, message: str = "") -> T:
    """Call ``condition`` every ``interval`` seconds until it returns something truthy; return that.

    The condition may itself assert (e.g. that a query is still alive): its AssertionError ends the
    wait at once, which is quicker and clearer than waiting out the deadline.

    Args:
        condition: What to wait for; called at least once, and once more at the deadline.
        timeout: Seconds to wait at most.
        interval: Seconds between calls.
        message: What is awaited, for the failure ("the 900 events in the table").

    Returns:
        The condition's first truthy value.

    Raises:
        AssertionError: If the condition is still falsy after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(condition, "__name__", repr(condition))
            raise AssertionError(f"waited {timeout:g} s for {what}; the last check gave {value!r}")
        time.sleep(interval)
