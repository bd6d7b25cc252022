"""The ingest job entry point: the CLI's own options, its exit status and one-line errors."""

from __future__ import annotations

import pytest

from icestream import cli
from icestream.jobs import ingest as job

pytestmark = pytest.mark.unit

ARGUMENTS = ["--available-now", "--trigger", "500ms", "--max-records-per-shard", "200", "--no-dedupe", "--quiet"]


def test_the_job_takes_exactly_the_options_of_icestream_ingest() -> None:
    from_cli = vars(cli.build_parser().parse_args(["--profile", "local", "ingest", *ARGUMENTS]))
    from_job = vars(job.build_parser().parse_args(["--profile", "local", *ARGUMENTS]))
    assert {key: value for key, value in from_cli.items() if key not in ("command", "handler")} == from_job


def test_an_error_a_user_can_fix_is_one_line_with_status_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ICESTREAM_SHIP", "scp")
    assert job.main(["--available-now"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ICESTREAM_SHIP / ship:")
    assert len(err.strip().splitlines()) == 1
