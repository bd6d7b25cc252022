"""The source's crash drill: off without its variable, counts arrivals in its folder, kills only at the n-th."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from icestream.kinesis_source import crash_drill
from icestream.kinesis_source.crash_drill import ENV, reached

GROUP = 4242


@pytest.fixture
def kills(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The kills the drill asked for, recorded instead of made."""
    asked: list[tuple[int, int]] = []
    monkeypatch.setattr(crash_drill.os, "killpg", lambda group, signal_number: asked.append((group, signal_number)))
    return asked


@pytest.fixture
def marks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    folder = tmp_path / "marks"
    monkeypatch.setenv(f"{ENV}_DIR", str(folder))
    monkeypatch.setenv(f"{ENV}_GROUP", str(GROUP))
    return folder


def test_nothing_happens_without_the_variable(
    monkeypatch: pytest.MonkeyPatch, kills: list[tuple[int, int]], marks: Path
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    for stage in crash_drill.STAGES:
        reached(stage)
    assert kills == []
    assert not marks.exists()


def test_another_stage_is_not_counted(
    monkeypatch: pytest.MonkeyPatch, kills: list[tuple[int, int]], marks: Path
) -> None:
    monkeypatch.setenv(ENV, "partitions:1")
    reached("latest_offset")
    reached("read")
    assert kills == []
    assert not marks.exists()


def test_kills_the_group_only_at_the_nth_arrival(
    monkeypatch: pytest.MonkeyPatch, kills: list[tuple[int, int]], marks: Path
) -> None:
    monkeypatch.setenv(ENV, "partitions:3")
    reached("partitions")
    reached("partitions")
    assert kills == []
    reached("partitions")
    assert kills == [(GROUP, signal.SIGKILL)]
    reached("partitions")
    assert kills == [(GROUP, signal.SIGKILL)]
    assert sorted(path.name for path in marks.iterdir()) == [f"partitions-{n}" for n in (1, 2, 3, 4)]


def test_arrivals_of_other_processes_count_through_the_folder(
    monkeypatch: pytest.MonkeyPatch, kills: list[tuple[int, int]], marks: Path
) -> None:
    monkeypatch.setenv(ENV, "read:2")
    marks.mkdir()
    (marks / "read-1").touch()  # another Python worker reached the stage first
    reached("read")
    assert kills == [(GROUP, signal.SIGKILL)]


def test_a_stage_without_a_number_kills_at_its_first_arrival(
    monkeypatch: pytest.MonkeyPatch, kills: list[tuple[int, int]], marks: Path
) -> None:
    monkeypatch.setenv(ENV, "latest_offset")
    reached("latest_offset")
    assert kills == [(GROUP, signal.SIGKILL)]
