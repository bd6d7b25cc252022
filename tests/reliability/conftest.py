"""Reliability campaigns: fixtures, the bounded/full switch, and the table of figures printed at the end.

``make test`` runs the bounded campaigns (a few trials each, a couple of minutes);
``make reliability`` sets ``ICESTREAM_RELIABILITY=full`` and runs every campaign at full size.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from icestream.config import Settings
from tests.reliability import figures
from tests.reliability.figures import FULL


@pytest.fixture(scope="session", autouse=True)
def _figures_home(settings: Settings) -> None:
    figures.set_meta(mode="full" if FULL else "bounded", run_dir=str(settings.path("run_dir")), started=time.time())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the figures of every campaign that ran, and save them next to the run state."""
    table = figures.rows()
    if not table:
        return
    terminalreporter.section("reliability figures")
    started = figures._meta.get("started")
    if started:
        figures.set_meta(seconds=round(time.time() - started, 1))
    for line in figures.render(table):
        terminalreporter.write_line(line)
    run_dir = figures._meta.get("run_dir")
    if run_dir:
        path = figures.write(Path(run_dir))
        terminalreporter.write_line(f"(also in {path})")
