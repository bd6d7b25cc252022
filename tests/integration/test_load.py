"""``icestream load``: JSON-lines files into the events and rejects tables, each file exactly once."""

from __future__ import annotations

import gzip
import json
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from icestream.cli import main
from icestream.config import Settings, load_settings, project_home
from icestream.errors import ConfigError
from icestream.file_load.files import LOAD_FILE_KEY, list_files, load_files, split_lines
from icestream.lake.table import setup_tables
from icestream.synthetic.samples import read_malformed_samples
from tests.helpers.crash import SimulatedCrashError, crash_at
from tests.helpers.samples import EXPECTED_REASON

SAMPLES = project_home() / "data" / "samples"
EVENT_LINES = (SAMPLES / "events.jsonl").read_bytes().splitlines()
MALFORMED = {kind: data for kind, data in read_malformed_samples(SAMPLES / "malformed.jsonl").items() if data}


@pytest.fixture
def tables(spark) -> Callable[[], Settings]:
    def make() -> Settings:
        made = load_settings(table=f"load_{uuid.uuid4().hex[:8]}")
        setup_tables(spark, made)
        return made

    return make


def write_file(path: Path, lines: list[bytes], compress: bool = False) -> Path:
    content = b"\n".join(lines) + b"\n"
    path.write_bytes(gzip.compress(content) if compress else content)
    return path


def state(spark, settings: Settings) -> tuple[Counter, Counter]:
    events = Counter(row.event_id for row in spark.table(settings.table_name).select("event_id").collect())
    rejects = Counter(row.reason for row in spark.table(settings.rejects_table_name).select("reason").collect())
    return events, rejects


def all_ids(lines: list[bytes]) -> set[str]:
    return {json.loads(line)["event_id"] for line in lines}


def assert_each_once(events: Counter, lines: list[bytes]) -> None:
    """The table holds exactly the events of ``lines``, each once."""
    assert set(events) == all_ids(lines)
    assert max(events.values()) == 1


@pytest.mark.parametrize("fails", [False, True])
def test_a_load_frees_the_rows_it_kept_whether_it_commits_or_fails(
    spark, tables, kept_blocks, tmp_path: Path, fails: bool
) -> None:
    settings = tables()
    path = write_file(tmp_path / "a.jsonl", EVENT_LINES[:50])
    before = kept_blocks()

    crash = crash_at("between_commits") if fails else None
    if fails:
        with pytest.raises(SimulatedCrashError):
            load_files(spark, settings, [str(path)], fault=crash)
    else:
        assert load_files(spark, settings, [str(path)], fault=crash).written == 50
    assert kept_blocks() <= before, "a file's rows stayed in the block store"


def test_a_file_loaded_twice_is_loaded_once(spark, tables, tmp_path: Path) -> None:
    settings = tables()
    first = write_file(tmp_path / "a.jsonl", EVENT_LINES[:100])
    second = write_file(tmp_path / "b.jsonl", EVENT_LINES[100:150])

    result = load_files(spark, settings, [str(first)])
    assert (result.loaded, result.written, result.rejected) == (1, 100, 0)
    again = load_files(spark, settings, [str(tmp_path)])  # the folder: a.jsonl is known, b.jsonl is new
    assert (again.files, again.loaded, again.skipped, again.written) == (2, 1, 1, 50)
    assert load_files(spark, settings, [str(first), str(second)]).loaded == 0

    events, _ = state(spark, settings)
    assert_each_once(events, EVENT_LINES[:150])
    summaries = [row.summary for row in spark.sql(f"SELECT summary FROM {settings.table_name}.snapshots").collect()]
    assert sum(LOAD_FILE_KEY in summary for summary in summaries) == 2


def test_gzip_files_and_duplicates_across_files(spark, tables, tmp_path: Path) -> None:
    settings = tables()
    plain = write_file(tmp_path / "plain.jsonl", EVENT_LINES[:60])
    # Overlaps the plain file by 20 events, repeats one line inside itself, no .gz suffix needed.
    packed = write_file(tmp_path / "packed.data", [*EVENT_LINES[40:80], EVENT_LINES[45]], compress=True)
    assert packed.read_bytes()[:2] == b"\x1f\x8b"

    result = load_files(spark, settings, [str(plain), str(packed)])
    assert (result.lines, result.written, result.deduplicated, result.rejected) == (101, 80, 21, 0)
    events, _ = state(spark, settings)
    assert_each_once(events, EVENT_LINES[:80])


def test_malformed_lines_go_to_rejects_with_their_reasons(spark, tables, tmp_path: Path) -> None:
    settings = tables()
    lines = [EVENT_LINES[0], *MALFORMED.values(), b"   ", EVENT_LINES[1]]  # a blank line is not a record
    path = write_file(tmp_path / "mixed.jsonl", lines)

    result = load_files(spark, settings, [str(path)])
    assert (result.written, result.rejected, result.lines) == (2, len(MALFORMED), len(MALFORMED) + 2)
    _, rejects = state(spark, settings)
    assert rejects == Counter(EXPECTED_REASON[kind] for kind in MALFORMED)  # every sample, for its own reason
    row = spark.table(settings.rejects_table_name).where("reason = 'non_utf8'").first()
    assert bytes(row.raw_data) == MALFORMED["non_utf8"]
    assert row.shard_id == list_files(spark, [str(path)])[0].shard_id
    assert row.sequence_number == str(lines.index(MALFORMED["non_utf8"]) + 1)
    assert load_files(spark, settings, [str(path)]).loaded == 0
    assert sum(state(spark, settings)[1].values()) == len(MALFORMED)


@pytest.mark.parametrize("phase", ["between_commits", "after_commit"])
def test_a_crash_during_a_load_never_half_loads_a_file(spark, tables, tmp_path: Path, phase: str) -> None:
    settings = tables()
    path = write_file(tmp_path / "crash.jsonl", [*EVENT_LINES[:30], MALFORMED["truncated_json"], *EVENT_LINES[30:40]])

    with pytest.raises(SimulatedCrashError):
        load_files(spark, settings, [str(path)], fault=crash_at(phase))
    events, rejects = state(spark, settings)
    assert rejects == Counter({"invalid_json": 1})
    assert len(events) == (40 if phase == "after_commit" else 0)

    result = load_files(spark, settings, [str(path)])
    assert result.loaded == (0 if phase == "after_commit" else 1)
    events, rejects = state(spark, settings)
    assert_each_once(events, EVENT_LINES[:40])
    assert rejects == Counter({"invalid_json": 1})


def test_a_write_that_fails_before_its_commit_leaves_nothing(spark, tables, tmp_path: Path) -> None:
    """The events write fails inside its Spark job (files written, no commit): the load runs again cleanly."""
    from pyspark.sql import functions as F  # noqa: N812

    settings = tables()
    path = write_file(tmp_path / "fails.jsonl", [*EVENT_LINES[:50], MALFORMED["json_array"]])
    poisoned = json.loads(EVENT_LINES[25])["event_id"]

    def failing(frame):
        check = F.assert_true(F.col("event_id") != F.lit(poisoned), F.lit("simulated write failure"))
        return frame.withColumn("user_id", F.when(check.isNull(), F.col("user_id")))

    with pytest.raises(Exception, match="simulated write failure"):
        load_files(spark, settings, [str(path)], transform=failing)
    events, rejects = state(spark, settings)
    assert (len(events), rejects) == (0, Counter({"not_an_object": 1}))

    load_files(spark, settings, [str(path)])
    events, rejects = state(spark, settings)
    assert_each_once(events, EVENT_LINES[:50])
    assert rejects == Counter({"not_an_object": 1})


def test_the_ledger_survives_snapshot_expiry(spark, tables, tmp_path: Path) -> None:
    """With the ledger's snapshots expired, the rows themselves say which files were loaded."""
    settings = tables()
    first = write_file(tmp_path / "one.jsonl", EVENT_LINES[:20])
    load_files(spark, settings, [str(first)])
    write_file(tmp_path / "two.jsonl", EVENT_LINES[20:30])
    load_files(spark, settings, [str(tmp_path / "two.jsonl")])
    spark.sql(
        f"CALL {settings.catalog}.system.expire_snapshots(table => '{settings.namespace}.{settings.table}', "
        f"older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    )
    assert spark.sql(f"SELECT count(*) FROM {settings.table_name}.snapshots").first()[0] == 1

    assert load_files(spark, settings, [str(tmp_path)]).loaded == 0
    assert sum(state(spark, settings)[0].values()) == 30


def test_the_cli_loads_each_file_once(spark, tables, tmp_path: Path, capsys, monkeypatch) -> None:
    settings = tables()
    write_file(tmp_path / "cli.jsonl.gz", [*EVENT_LINES[:10], MALFORMED["missing_user_id"]], compress=True)
    monkeypatch.setenv("ICESTREAM_TABLE", settings.table)
    assert main(["load", "--quiet", str(tmp_path / "cli.jsonl.gz")]) == 0
    assert main(["load", "--quiet", str(tmp_path / "cli.jsonl.gz")]) == 0
    assert main(["load", "--quiet", str(tmp_path / "missing.jsonl")]) == 2
    events, rejects = state(spark, settings)
    assert_each_once(events, EVENT_LINES[:10])
    assert rejects == Counter({"missing_user_id": 1})
    assert "Check the path" in capsys.readouterr().err


def test_split_lines_handles_gzip_crlf_and_blank_lines() -> None:
    content = b'{"a":1}\r\n\n  \n{"b":2}'
    assert list(split_lines(content)) == [(1, b'{"a":1}'), (4, b'{"b":2}')]
    assert list(split_lines(gzip.compress(content))) == list(split_lines(content))


def test_a_path_that_does_not_exist_is_a_clear_error(spark, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Check the path"):
        list_files(spark, [str(tmp_path / "nowhere.jsonl")])
