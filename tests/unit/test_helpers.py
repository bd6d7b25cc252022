"""The test helpers' own promises: a wait fails loudly at its deadline, a crash hook fires only where asked."""

from __future__ import annotations

import itertools

import pytest

from tests.helpers.crash import SimulatedCrashError, crash_at
from tests.helpers.waiting import wait_until


def test_wait_until_returns_the_first_truthy_value() -> None:
    calls = itertools.count(1)
    assert wait_until(lambda: next(calls) >= 3 and "ready", timeout=5, interval=0.001) == "ready"


def test_wait_until_fails_loudly_at_its_deadline_naming_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match=r"waited 0\.05 s for the table to fill; the last check gave 0"):
        wait_until(lambda: 0, timeout=0.05, interval=0.01, message="the table to fill")


def test_wait_until_stops_at_once_when_the_condition_asserts() -> None:
    def dead() -> bool:
        raise AssertionError("the query died")

    with pytest.raises(AssertionError, match="the query died"):
        wait_until(dead, timeout=60)


def test_crash_at_fires_only_at_its_phase_and_batch() -> None:
    hook = crash_at("between_commits", batch=2)
    hook("between_commits", 1)
    hook("after_commit", 2)
    with pytest.raises(SimulatedCrashError, match="between_commits"):
        hook("between_commits", 2)
    with pytest.raises(SimulatedCrashError):
        crash_at("after_commit")("after_commit", "/data/a.jsonl")  # any batch, or a load's file
