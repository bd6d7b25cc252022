"""Event-time windows: the bound values of the window predicate."""

from __future__ import annotations

from datetime import UTC, datetime

from icestream.lake.window import WINDOW_SQL, Window


def test_window_binds_epoch_microseconds() -> None:
    span = Window(datetime(1970, 1, 1, tzinfo=UTC), datetime(1970, 1, 1, 0, 0, 2, 5, tzinfo=UTC))
    assert span.args == {"start": 0, "end": 2_000_005}
    assert ":start" in WINDOW_SQL
    assert ":end" in WINDOW_SQL
