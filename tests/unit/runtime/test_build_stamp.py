"""Entry points stamped by ``icestream ship`` refuse another build of icestream, in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from icestream.errors import ConfigError
from icestream.jobs import cli as job_cli
from icestream.jobs import ingest as job_ingest
from icestream.runtime import build_stamp

ENTRY_POINTS = (Path(job_ingest.__file__), Path(job_cli.__file__))


def test_the_build_id_is_the_version_and_a_digest_of_the_files(tmp_path: Path) -> None:
    copy = tmp_path / "icestream"
    (copy / "jobs").mkdir(parents=True)
    (copy / "__init__.py").write_text("x = 1\n")
    (copy / "jobs" / "a.py").write_text("y = 2\n")
    first = build_stamp.build_id(copy)
    assert first.startswith(f"{build_stamp.icestream.__version__}+")
    (copy / "jobs" / "__pycache__").mkdir()
    (copy / "jobs" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"compiled")
    assert build_stamp.build_id(copy) == first  # compiled files do not count
    (copy / "jobs" / "a.py").write_text("y = 3\n")
    assert build_stamp.build_id(copy) != first


def test_stamping_needs_exactly_one_line() -> None:
    assert (
        build_stamp.stamp(f"a\n{build_stamp.STAMP_LINE}\nb\n", "0.1.0+abc")
        == "a\nSHIPPED_BUILD: str | None = '0.1.0+abc'\nb\n"
    )
    with pytest.raises(ConfigError, match="has 0 "):
        build_stamp.stamp("a\n", "0.1.0+abc")


@pytest.mark.parametrize("entry_point", ENTRY_POINTS, ids=lambda path: path.name)
def test_a_stamped_entry_point_refuses_another_build_and_runs_its_own(entry_point: Path, tmp_path: Path) -> None:
    source = entry_point.read_text()
    stale, current = tmp_path / "stale.py", tmp_path / "current.py"
    stale.write_text(build_stamp.stamp(source, "0.0.9+000000000000"))
    current.write_text(build_stamp.stamp(source, build_stamp.build_id()))
    refused = subprocess.run([sys.executable, str(stale), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [build_stamp.refuse_other_build("0.0.9+000000000000")]
    assert "0.0.9+000000000000" in refused.stderr
    ran = subprocess.run([sys.executable, str(current), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "usage:" in ran.stdout
