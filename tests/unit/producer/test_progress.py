"""The producer's progress renders as one line where the output is not a terminal (papermill, logs)."""

from __future__ import annotations

import io

from icestream.producer.progress import SummaryLine, progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_outside_a_terminal_progress_is_one_line_at_the_end() -> None:
    out = io.StringIO()
    bar = progress_bar(30_000, "→ user-events", file=out)
    assert isinstance(bar, SummaryLine)
    for _ in range(60):
        bar.update(500)
    assert out.getvalue() == "", "nothing while sending"
    bar.close()
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("→ user-events: 30,000/30,000 rec in ")
    assert "\r" not in out.getvalue()


def test_on_a_terminal_it_is_a_live_bar_and_disabled_means_silent() -> None:
    terminal = Terminal()
    bar = progress_bar(10, "→ s", file=terminal)
    bar.update(10)
    bar.close()
    assert "\r" in terminal.getvalue()
    assert "10/10" in terminal.getvalue()
    quiet = io.StringIO()
    silent = progress_bar(10, "→ s", enabled=False, file=quiet)
    silent.update(10)
    silent.close()
    assert quiet.getvalue() == ""
