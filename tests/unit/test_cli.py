"""The CLI: argument handling and one-line errors (no emulator, no JVM)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from icestream import cli
from icestream.cli import local, notebooks
from icestream.workbook.runner import notebook_paths


def test_bad_setting_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ICESTREAM_TABLE", "x; DROP TABLE y")
    assert cli.main(["setup"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ICESTREAM_TABLE / table:")
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_doctor_reports_a_bad_profile(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ICESTREAM_PROFILE", "staging")
    assert cli.main(["doctor", "--quick"]) == 1
    assert capsys.readouterr().out.startswith("FAIL settings")


@pytest.mark.parametrize(("catalog_type", "words"), [("jdbc", "safe for several"), ("hadoop", "ONE writing process")])
def test_doctor_reports_the_catalog_and_who_may_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_type: str, words: str
) -> None:
    import zipfile

    from icestream.config import load_settings

    # An upstream-style driver (natives bundled), so the check does not depend on this machine's packages.
    driver = tmp_path / "sqlite-jdbc.jar"
    with zipfile.ZipFile(driver, "w") as archive:
        archive.writestr("org/sqlite/JDBC.class", b"")
        archive.writestr("org/sqlite/native/Linux/x86_64/libsqlitejdbc.so", b"")
    settings = load_settings(warehouse=str(tmp_path / "wh"), catalog_type=catalog_type, sqlite_jdbc_jar=str(driver))
    checks = dict(local._doctor_checks(settings, start_spark=False))
    line = checks["catalog"]()
    assert catalog_type in line
    assert words in line
    assert (str(driver) in line) == (catalog_type == "jdbc")


def test_emulator_down_is_reported_with_the_command_that_starts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path))
    assert cli.main(["emulator", "status"]) == 1
    assert "icestream emulator start" in capsys.readouterr().out


def test_run_parameters_are_yaml_scalars() -> None:
    args = cli.build_parser().parse_args(["run", "00", "-p", "shard_count", "2", "-p", "stream_name", "s1"])
    assert notebooks._parameters(args.parameter) == {"shard_count": 2, "stream_name": "s1"}


def test_run_parameters_that_yaml_reads_as_dates_or_lists_stay_strings() -> None:
    pairs = [["score_start", "2026-11-23T10:00:00+00:00"], ["day", "2026-11-23"], ["types", "[a, b]"]]
    pairs += [["dry", "true"], ["hours", "1.5"], ["now", "null"]]
    assert notebooks._parameters(pairs) == {
        "score_start": "2026-11-23T10:00:00+00:00", "day": "2026-11-23", "types": "[a, b]",
        "dry": True, "hours": 1.5, "now": None,
    }  # fmt: skip


def test_unknown_notebook_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "99_nothing"]) == 2
    assert "No notebook matches '99_nothing'" in capsys.readouterr().err


def test_notebooks_run_in_name_order() -> None:
    every = notebook_paths()
    assert every, "notebooks/ has notebooks"
    assert [path.name for path in every] == sorted(path.name for path in every)
    assert every[0].name == "00_setup.ipynb"
    assert notebook_paths(["00"]) == [every[0]]
    names = [path.name for path in every]
    assert all(re.fullmatch(r"\d\d(_[a-z0-9]+)+\.ipynb", name) for name in names), f"NN_verb_object.ipynb: {names}"
    assert [int(name[:2]) for name in names] == list(range(len(names))), f"numbered 00, 01, ... with no gap: {names}"


def test_ship_requirements_lists_the_executors_pins(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ship", "--requirements"]) == 0
    pins = capsys.readouterr().out.split()
    assert any(pin.startswith("boto3==") for pin in pins)
    assert all("==" in pin for pin in pins)


def test_produce_refuses_aggregation_in_the_background(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["produce", "--aggregate", "5", "--background"]) == 2
    assert "--aggregate and --compress are for foreground runs" in capsys.readouterr().err


def test_a_scheduled_runs_copies_are_named_by_its_start_and_never_overwrite(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from icestream.workbook.runner import stamped_name

    notebook = Path("notebooks/02_stream_ingest.ipynb")
    started = datetime(2026, 11, 25, 9, 5, 7, 123456, tzinfo=timezone(timedelta(hours=1)))
    first = stamped_name(notebook, started, tmp_path)
    assert first == tmp_path / "02_stream_ingest-20261125T080507Z.ipynb", "named in UTC, to the second"
    first.write_text("{}")
    second = stamped_name(notebook, started.astimezone(UTC), tmp_path)
    assert second == tmp_path / "02_stream_ingest-20261125T080507Z-2.ipynb", "the same second: a new name"
    second.write_text("{}")
    assert stamped_name(notebook, started, tmp_path).name == "02_stream_ingest-20261125T080507Z-3.ipynb"


def test_run_stamp_is_an_option() -> None:
    assert cli.build_parser().parse_args(["run", "02", "--stamp"]).stamp is True
    assert cli.build_parser().parse_args(["run", "02"]).stamp is False
