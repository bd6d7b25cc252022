"""``icestream ingest``'s options: what the command line gives the ingest (no emulator, no JVM)."""

from __future__ import annotations

import pytest

from icestream import cli
from icestream.cli.ingest_command import ingest_options_from


def test_ingest_takes_min_records_and_a_max_trigger_delay() -> None:
    args = cli.build_parser().parse_args(["ingest", "--min-records", "500", "--max-trigger-delay", "30s", "--quiet"])
    options = ingest_options_from(args)
    assert (options["min_records"], options["max_trigger_delay_seconds"]) == (500, 30.0)
    plain = ingest_options_from(cli.build_parser().parse_args(["ingest", "--quiet"]))
    assert plain["min_records"] is None
    assert "max_trigger_delay_seconds" not in plain, "the option's own default (15 minutes) applies"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--max-trigger-delay", "30s"], "error: --max-trigger-delay bounds how long --min-records"),
        (["--min-records", "10", "--max-trigger-delay", "soon"], "error: trigger 'soon'"),
        (["--min-records", "0"], "error: ingest option min_records"),
        (["--trigger", "inf"], "error: trigger 'inf': use a finite time"),
        (["--trigger", "0s"], "error: ingest option trigger_seconds: 0 s is below 0.2 s (--trigger 200ms)"),
        (["--trigger", "10m"], "error: ingest option trigger_seconds: 600 s is above 60 s (--trigger 1m)"),
    ],
)
def test_ingest_refuses_a_bad_min_records_or_delay_in_one_line(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    assert cli.main(["ingest", *arguments]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert len(err.strip().splitlines()) == 1


def test_ingest_takes_a_change_stream_declaration() -> None:
    args = cli.build_parser().parse_args(
        ["ingest", "--changes", "id bigint, v bigint, name string", "--key", "id", "--order", "v",
         "--change-format", "debezium", "--quiet"]
    )  # fmt: skip
    spec = ingest_options_from(args)["changes"]
    assert (spec.keyed.key, spec.keyed.order, spec.shape) == (("id",), "v", "debezium")
    assert ingest_options_from(args)["dedupe"] is None, "the ingest decides: off for a change stream"
    assert "changes" not in ingest_options_from(cli.build_parser().parse_args(["ingest", "--quiet"]))


def test_ingest_refuses_a_bad_change_declaration_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ingest", "--changes", "id bigint", "--key", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: changes key 'nope'")
    assert len(err.strip().splitlines()) == 1


def test_ingest_and_metrics_take_the_continuous_aggregate() -> None:
    parser = cli.build_parser()
    assert ingest_options_from(parser.parse_args(["ingest", "--metrics", "--quiet"]))["metrics"] is True
    assert ingest_options_from(parser.parse_args(["ingest", "--quiet"]))["metrics"] is None, "the setting decides"
    args = parser.parse_args(["metrics", "--table", "clicks", "--rebuild", "--view"])
    assert (args.table, args.rebuild, args.view) == ("clicks", True, "real_time_metrics")
    assert parser.parse_args(["metrics"]).view is None


def test_ingest_takes_a_batch_bound_and_a_group_of_shards_per_task() -> None:
    args = cli.build_parser().parse_args(["ingest", "--max-records-per-batch", "5000", "--shards-per-task", "3"])
    options = ingest_options_from(args)
    assert (options["max_records_per_batch"], options["shards_per_task"]) == (5000, 3)


def test_a_batch_line_shows_its_longest_phases_and_the_drivers_heap() -> None:
    from icestream.cli.ingest_command import _progress_line

    progress = {
        "batch_id": 3, "num_input_rows": 40_000, "written": 39_000, "rejected": 200, "deduplicated": 800,
        "millis_behind_latest": 0, "driver_heap_mib": {"used": 412.4, "committed": 600.0, "max": 1024.0},
        "duration_ms": {"plan": 6.0, "read": 2100.0, "dedupe": 40.0, "write_events": 430.0, "total": 2750.0},
    }  # fmt: skip
    line = _progress_line(progress)
    assert "2.75 s (read 2.10, write_events 0.43)" in line, line  # plan and dedupe under a tenth: left out
    assert line.endswith("behind 0.0 s  heap 412/1024 MiB"), line
    assert "heap" not in _progress_line({**progress, "driver_heap_mib": None})


def test_a_batch_line_counts_the_times_cut_to_microseconds_when_there_are_any() -> None:
    from icestream.cli.ingest_command import _progress_line

    progress = {
        "batch_id": 3,
        "num_input_rows": 40,
        "written": 39,
        "rejected": 1,
        "deduplicated": 0,
        "millis_behind_latest": 0,
        "driver_heap_mib": None,
        "duration_ms": {"read": 200.0, "total": 250.0},
    }
    line = _progress_line({**progress, "event_times_cut": 3})
    assert "deduplicated    0  3 times cut to µs  " in line, line
    assert "cut" not in _progress_line({**progress, "event_times_cut": 0})
