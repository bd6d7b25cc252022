"""The ingest job entry point: the CLI's own options, its exit status and one-line errors."""

from __future__ import annotations

import pytest

from icestream import cli
from icestream.jobs import ingest as job

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


GLUE = ["--JOB_ID", "j_0123", "--JOB_RUN_ID", "jr_4567", "--job-bookmark-option", "job-bookmark-disable",
        "--TempDir", "s3://bucket/tmp/", "--enable-metrics", "", "--datalake-formats=iceberg"]  # fmt: skip


def test_glues_own_arguments_are_ignored_and_settings_come_as_arguments(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ours, settings = job.split_job_arguments([*GLUE, "--ICESTREAM_TABLE", "events", *ARGUMENTS])
    assert ours == ARGUMENTS
    # A flag as a Glue job argument comes with an empty value.
    assert job.split_job_arguments(["--available-now", "", "--quiet", ""]) == (["--available-now", "--quiet"], {})
    assert settings == {"ICESTREAM_TABLE": "events"}

    # End to end through main: the setting given as an argument is the one the job loads.
    monkeypatch.setenv("ICESTREAM_SHIP", "auto")  # main replaces it; the fixture restores it
    assert job.main([*GLUE, "--ICESTREAM_SHIP=scp", "--available-now"]) == 2
    assert capsys.readouterr().err.startswith("error: ICESTREAM_SHIP / ship:")


def test_an_argument_that_is_neither_the_jobs_nor_glues_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_status:
        job.main([*GLUE, "--available-now", "--bogus", "1"])
    assert exit_status.value.code == 2
    assert "unrecognized arguments: --bogus 1" in capsys.readouterr().err
