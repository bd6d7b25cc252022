"""The schedule: units happen in event-time order, records leave in send order, exact budgets, thinning."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icestream.errors import ConfigError
from icestream.synthetic.schedule import Schedule, choose_dropped, thinning_plan
from icestream.synthetic.wire import Record


def unit(event_ts: float, *delays: float, first: int = 0) -> list[tuple[int, Record]]:
    """An event at ``event_ts`` and one more record per delay (a duplicate, a malformed one), numbered."""
    kinds = ["event", "duplicate", "invalid_json"]
    return [
        (first + n, Record(b"x", "k", kinds[n], event_ts, event_ts + delay, event_id=f"{event_ts}/{n}"))
        for n, delay in enumerate((0.0, *delays))
    ]


def test_records_leave_in_send_order_after_their_units_happen() -> None:
    schedule = Schedule()
    schedule.add(1.0, unit(1.0, 5.0, first=0))  # a late duplicate
    schedule.add(2.0, unit(2.0, first=10))
    schedule.admit(before=3.0)
    assert [r.event_id for r in schedule.release(before=3.0)] == ["1.0/0", "2.0/0"]
    assert [r.event_id for r in schedule.drain()] == ["1.0/1"]
    assert schedule.admitted == 3
    assert not schedule.full


def test_a_budget_cuts_the_unit_that_spends_it_and_sends_what_is_owed_at_that_instant() -> None:
    tags: Counter[str] = Counter()
    schedule = Schedule(budget=4, tags=tags)
    schedule.add(1.0, unit(1.0, 30.0, first=0), "anomaly_extra")  # event + a duplicate due at 31
    schedule.add(2.0, unit(2.0, 0.5, 0.7, first=10))  # event, duplicate, malformed: only two fit
    schedule.add(3.0, unit(3.0, first=20))  # never happens
    schedule.admit(before=10.0)
    assert schedule.full
    assert schedule.stopped_at == 2.0
    left = list(schedule.drain())
    assert [r.event_id for r in left] == ["1.0/0", "2.0/0", "2.0/1", "1.0/1"]
    assert [r.send_at for r in left] == [1.0, 2.0, 2.0, 2.0], "owed records leave when the budget is spent"
    assert schedule.admitted == 4
    assert tags == {"anomaly_extra": 1}


def test_dropped_units_never_happen() -> None:
    schedule = Schedule(dropped=frozenset({1}))
    for number in range(3):
        schedule.add(float(number), unit(float(number), first=10 * number))
    assert [r.event_id for r in schedule.drain()] == ["0.0/0", "2.0/0"]


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=200),
    share=st.floats(min_value=0.0, max_value=1.0),
    seed=st.integers(min_value=0, max_value=1000),
)
def test_thinning_keeps_exactly_the_records_asked_for(sizes: list[int], share: float, seed: int) -> None:
    fixed = frozenset(range(0, len(sizes), 7))
    singles = sum(1 for n, size in enumerate(sizes) if size == 1 and n not in fixed)
    # Any target down to what the fixed units hold is reachable while single-record units remain.
    least = sum(size for n, size in enumerate(sizes) if n in fixed or size > 1)
    keep = least + round(share * singles)
    dropped = choose_dropped(sizes, keep, fixed, random.Random(seed))
    assert sum(size for n, size in enumerate(sizes) if n not in dropped) == keep
    assert not dropped & fixed


def test_thinning_refuses_a_window_too_small() -> None:
    with pytest.raises(ConfigError, match="fewer than"):
        choose_dropped([1, 1], 3, frozenset(), random.Random(0))


def test_the_thinning_plan_tries_again_denser_when_a_pass_falls_short() -> None:
    densities: list[float] = []

    def unit_sizes(density: float) -> list[int]:
        densities.append(density)
        return [1] * int(800 * density)  # the first density (about 1.33) gives 1,064 units: too few

    density, dropped = thinning_plan(1_100, unit_sizes, random.Random(0))
    assert len(densities) == 2
    assert densities[1] > densities[0] == pytest.approx(1 + 3 * (12 / 1_100) ** 0.5)
    assert int(800 * density) - len(dropped) == 1_100
