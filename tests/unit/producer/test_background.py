"""The background producer's bounds: a duration or a record count, never both, at most six hours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icestream.config import Settings, load_settings
from icestream.errors import ConfigError
from icestream.producer import background
from icestream.producer.background import (
    DRAIN_MARGIN_SECONDS,
    BackgroundProducerStatus,
    ingest_seconds,
    keep_producing,
    live_window,
    start_background_producer,
)


@pytest.fixture
def run_settings(tmp_path: Path) -> Settings:
    return load_settings(run_dir=str(tmp_path))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"duration": 10.0, "count": 100}, "not both"),
        ({"count": 0}, "at least 1"),
        ({"count": 10_000_000, "rate": 100.0}, "duration ≤"),
        ({"duration": 7 * 3600.0}, "duration ≤"),
        ({"rate": 0.0, "count": 10}, "positive number of records per second"),
    ],
)
def test_bounds_are_checked_before_anything_starts(
    run_settings: Settings, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        start_background_producer(run_settings, **options)
    assert not (run_settings.path("run_dir") / "producer.json").exists()


def _status(running: bool, ends_by: float | None) -> BackgroundProducerStatus:
    return BackgroundProducerStatus(running, 1, 900.0, ends_by, None, "summary.json", None, "")


def test_the_ingest_runs_until_a_running_producer_has_ended_and_its_last_records_are_committed() -> None:
    assert ingest_seconds(_status(True, 1060.0), 40.0, 2.0, now=1000.0) == 60.0 + 2 * 2.0 + DRAIN_MARGIN_SECONDS
    assert ingest_seconds(_status(True, 1005.0), 40.0, 2.0, now=1000.0) == 40.0, "the minimum still holds"
    assert ingest_seconds(_status(False, 1060.0), 40.0, 2.0, now=1000.0) == 40.0, "an ended producer sends nothing"


def test_live_production_is_kept_when_it_lasts_long_enough_and_started_anew_when_it_ends_too_soon(
    run_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from icestream.producer import background

    started: list[dict[str, Any]] = []
    monkeypatch.setattr(background, "start_background_producer", lambda _, **options: started.append(options) or "new")
    for status, seconds, expected in [
        (_status(True, 1060.0), 40.0, None),  # sends 60 s more: kept
        (_status(True, 1010.0), 40.0, {"rate": 50.0, "duration": 40.0, "replace": True}),  # ends in 10 s: replaced
        (_status(False, None), 40.0, {"rate": 50.0, "duration": 40.0, "replace": True}),  # none runs: started
        (_status(False, None), 0.0, None),  # 0: nothing started
    ]:
        started.clear()
        monkeypatch.setattr(background, "background_producer_status", lambda _, status=status: status)
        answer = keep_producing(run_settings, seconds, rate=50.0, now=1000.0)
        assert started == ([] if expected is None else [expected])
        assert answer == (status if expected is None else "new")


class FakeQuery:
    """An ingest query whose batches arrive one per look: backlog (behind the tip), then caught up."""

    def __init__(self, behind: list[int | None]) -> None:
        self.pending = list(behind)
        self.recent_progress: list[dict[str, Any]] = []
        self.status = {"message": "Initializing", "isDataAvailable": False}
        self.is_active = True
        self.stopped_after: int | None = None

    def look(self) -> None:
        if self.pending:
            self.recent_progress.append({"millis_behind_latest": self.pending.pop(0)})

    def stop(self) -> None:
        self.is_active = False
        self.stopped_after = len(self.recent_progress)


def test_live_production_starts_once_the_backlog_is_read_and_the_query_stops_after_it(
    run_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from icestream.producer import background

    query = FakeQuery([86_000, 40_000, 0])  # two batches behind the tip, the third reaches it
    started: list[int] = []
    waits: list[float] = []

    def fake_keep(_, seconds: float, rate: float) -> BackgroundProducerStatus:
        started.append(len(query.recent_progress))
        return _status(True, 1_000_000.0)

    monkeypatch.setattr(background, "keep_producing", fake_keep)
    monkeypatch.setattr(background, "ingest_seconds", lambda status, minimum, trigger: 42.0)

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        query.look()

    status = live_window(query, run_settings, seconds=35.0, rate=100.0, trigger_seconds=1.0, sleep=sleep)
    assert started == [3], "production began after the batch that reached the tip, not before"
    assert status.running
    assert waits[-1] == 42.0, "then the query runs until the producer's records are read"
    assert query.stopped_after == 3
    assert not query.is_active


def test_a_drained_stream_reports_no_batch_and_still_counts_as_caught_up(run_settings: Settings) -> None:
    query = FakeQuery([])
    query.status = {"message": "Waiting for next trigger", "isDataAvailable": False}
    assert background.caught_up(query)
    query.status = {"message": "Processing new data", "isDataAvailable": True}
    assert not background.caught_up(query)


FAKE_PRODUCER = """
import signal, sys, time
from pathlib import Path
ready, summary = Path(sys.argv[3]), Path(sys.argv[4])
time.sleep(1.0)  # a producer's start: imports, its plan, a Kinesis client
stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
ready.touch()
while not stopping:
    time.sleep(0.01)
summary.write_text("stopped after its batch")
"""


def test_a_stop_right_after_the_start_still_ends_with_a_summary(run_settings: Settings, tmp_path: Path) -> None:
    """A SIGTERM that arrives before the producer handles it would end it with no summary: the stop
    waits for the producer's ready file first. (The command line holds the marks a producer's has.)"""
    import sys

    from icestream.producer.background import LOG_FILE, STATE_FILE, stop_background_producer
    from icestream.producer.run import ready_path
    from icestream.runtime import processes

    script = tmp_path / "fake_producer.py"
    script.write_text(FAKE_PRODUCER)
    summary = tmp_path / "summary.txt"
    run_dir = run_settings.path("run_dir")
    # Its pid is only known once it runs: it finds its ready file through the folder and its own pid.
    command = [sys.executable, "-c", f"import os, runpy, sys; sys.argv[3] = sys.argv[3].format(pid=os.getpid()); "
               f"runpy.run_path({str(script)!r}, run_name='__main__')", "icestream.cli", "produce",
               str(run_dir / "producer-{pid}.ready"), str(summary)]  # fmt: skip
    process = processes.spawn(command, tmp_path / LOG_FILE)
    processes.write_state(run_dir / STATE_FILE, process.pid)

    assert stop_background_producer(run_settings) is True
    assert process.wait(timeout=60) == 0, (tmp_path / LOG_FILE).read_text()
    assert summary.read_text() == "stopped after its batch"
    assert not ready_path(run_settings, process.pid).exists(), "the stop removes the ready file"
