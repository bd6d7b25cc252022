"""The crash drill's pause: where it holds a batch, and that it is off unless asked for (no JVM)."""

from __future__ import annotations

import pytest

from icestream import cli
from icestream.cli.ingest_command import ingest_options_from
from icestream.errors import ConfigError
from icestream.ingest.crash_drill import PAUSE_MARK, parse_pause, pause_hook


def test_parse_pause_reads_a_phase_and_the_batch_of_this_process() -> None:
    assert parse_pause("between_commits") == ("between_commits", 1)
    assert parse_pause("after_read:3") == ("after_read", 3)


@pytest.mark.parametrize("text", ["between", "after_read:0", "after_read:two", ""])
def test_parse_pause_refuses_an_unknown_phase_or_batch(text: str) -> None:
    with pytest.raises(ConfigError, match="--pause-at"):
        parse_pause(text)


def test_the_hook_pauses_once_at_the_nth_batch_reaching_the_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("icestream.ingest.crash_drill.time.sleep", slept.append)
    said: list[str] = []
    hook = pause_hook("between_commits", batch=2, seconds=5, announce=said.append)
    for phase, batch_id in [
        ("before_read", 7), ("between_commits", 7),  # the first batch of this process (batch ids continue)
        ("between_commits", 7),  # the same batch again (a retry): still the first
        ("after_read", 8), ("between_commits", 8),  # the second: here
        ("between_commits", 9),  # once only
    ]:  # fmt: skip
        hook(phase, batch_id)
    assert slept == [5]
    assert len(said) == 1
    assert said[0].startswith(f"{PAUSE_MARK} between_commits of batch 8 (process ")


def test_a_pause_longer_than_the_lease_allows_is_refused() -> None:
    with pytest.raises(ConfigError, match="--pause-seconds"):
        pause_hook("after_read", seconds=600)


def test_the_command_line_pauses_only_when_asked() -> None:
    plain = ingest_options_from(cli.build_parser().parse_args(["ingest", "--quiet"]))
    assert "fault_hook" not in plain
    drill = ingest_options_from(cli.build_parser().parse_args(["ingest", "--quiet", "--pause-at", "after_read:2"]))
    assert callable(drill["fault_hook"])
