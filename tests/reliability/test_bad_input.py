"""Bad-input campaign: the malformed corpus and fuzzed payloads through the whole path, and bad parameters.

Payloads: every kind in ``MALFORMED_KINDS``, hand-picked nasties (a lone surrogate escaped in JSON,
deep nesting, NUL characters, huge numbers), and hypothesis-generated ones (random bytes, random
JSON, valid events with one field spoiled). Each goes through Kinesis, the Spark read tasks and
both tables; the query must finish, and every record must be accounted for:
good + rejected + deduplicated (+ replayed after a retry) = read, and each table holds exactly
what the parser says it should.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icestream.ingest.parse import ParsedEvent, parse_payload
from icestream.ingest.query import start_ingest
from icestream.kinesis.clients import ensure_stream, kinesis_client
from icestream.kinesis.emulator import free_port
from icestream.lake.table import setup_tables
from icestream.synthetic.malformed import MALFORMED_KINDS, malformed_payload
from tests.reliability import figures
from tests.reliability.figures import size
from tests.reliability.workload import event_document

NASTY = [
    b'{"event_id": "nul\\u0000id", "user_id": "u\\u0000", "event_type": "click", "event_ts": "2026-01-01T00:00:00Z"}',
    b"[" * 5000 + b"]" * 5000,
    b'{"event_id": "big", "user_id": "u", "event_type": "click", "event_ts": "2026-01-01T00:00:00Z", "n": '
    + b"9" * 5000
    + b"}",
    b'{"event_id": "dup-key", "event_id": "dup-key-2", "user_id": "u", "event_type": "x", '
    b'"event_ts": "2026-01-01T00:00:00+14:00"}',
    b"\xef\xbb\xbf{}",
    b"null",
    b"   ",
]

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def _spoiled_event(draw: st.DrawFn) -> bytes:
    document = event_document(draw(st.text(min_size=1, max_size=12)), draw(st.text(max_size=6)) or "u", 1)
    field = draw(st.sampled_from([*document, "extra"]))
    if draw(st.booleans()):
        document[field] = draw(_json)
    return json.dumps(document).encode()


_payload = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    _json.map(lambda value: json.dumps(value).encode()),
    _spoiled_event(),
)


def _through_the_pipeline(spark, fresh, payloads: list[bytes], tmp_path: Path) -> dict[str, Any]:
    """Send ``payloads``, drain them, and compare every table with the parser's verdict on each."""
    stream = fresh(shards=2, prefix="fuzz")
    keys = [f"k{index % 5}" for index in range(len(payloads))]
    placed: list[tuple[str, str]] = []
    client = kinesis_client(stream)
    for start in range(0, len(payloads), 500):
        answer = client.put_records(
            StreamName=stream.stream_name,
            Records=[{"Data": data, "PartitionKey": key} for data, key in
                     zip(payloads[start : start + 500], keys[start : start + 500], strict=True)],
        )  # fmt: skip
        assert answer["FailedRecordCount"] == 0
        placed += [(entry["ShardId"], entry["SequenceNumber"]) for entry in answer["Records"]]
    good_ids, rejected = set(), set()
    for data, place in zip(payloads, placed, strict=True):
        parsed = parse_payload(data)
        if isinstance(parsed, ParsedEvent):
            good_ids.add(parsed.event_id)
        else:
            rejected.add(place)
    query = start_ingest(spark, stream, available_now=True, trigger_seconds=0, batch_retries=0,
                         progress_file=tmp_path / f"{uuid.uuid4().hex}.jsonl")  # fmt: skip
    assert query.await_termination(timeout=300), "the drain did not end"  # and it raises if the query died
    progress = list(query.recent_progress)
    events = Counter(row.event_id for row in spark.table(stream.table_name).select("event_id").collect())
    rejects = Counter(
        (row.shard_id, row.sequence_number)
        for row in spark.table(stream.rejects_table_name).select("shard_id", "sequence_number").collect()
    )
    read = sum(batch["num_input_rows"] for batch in progress)
    accounted = sum(batch["written"] + batch["rejected"] + batch["deduplicated"] + batch["replayed"]
                    for batch in progress)  # fmt: skip
    assert read == len(payloads), (read, len(payloads))
    assert accounted == read, progress
    assert set(events) == good_ids
    assert max(events.values(), default=1) == 1
    assert set(rejects) == rejected
    assert max(rejects.values(), default=1) == 1
    return {"read": read, "good": len(good_ids), "rejected": len(rejected),
            "deduplicated": sum(batch["deduplicated"] for batch in progress)}  # fmt: skip


_totals: Counter[str] = Counter()


def test_malformed_corpus_and_nasty_payloads(spark, fresh, tmp_path: Path) -> None:
    corpus = [malformed_payload(kind) for kind in MALFORMED_KINDS] + NASTY
    valid = [json.dumps(event_document(f"ok-{n}", f"u{n}", 1)).encode() for n in range(10)]
    counts = _through_the_pipeline(spark, fresh, corpus + valid + valid[:3], tmp_path)
    figures.record("bad input", "malformed corpus + nasties", **counts, query_died=0)
    assert counts["deduplicated"] == 3


# A timestamp whose UTC form is outside datetime's range: astimezone() raises OverflowError.
LONE_SURROGATE = b'{"event_id": "\\ud800", "user_id": "u", "event_type": "click", "event_ts": "2026-01-01T00:00:00Z"}'
EDGE_TIMESTAMPS = [
    b'{"event_id": "ts", "user_id": "u", "event_type": "x", "event_ts": "0001-01-01T00:00:00+01:00"}',
    b'{"event_id": "ts2", "user_id": "u", "event_type": "x", "event_ts": "9999-12-31T23:59:59-01:00"}',
]


def test_timestamps_at_the_edge_of_time_are_rejected_not_fatal(spark, fresh, tmp_path: Path) -> None:
    valid = [json.dumps(event_document(f"edge-ok-{n}", "u", 1)).encode() for n in range(3)]
    counts = _through_the_pipeline(spark, fresh, EDGE_TIMESTAMPS + valid, tmp_path)
    figures.record("bad input", "timestamps at the edge of time", **counts, query_died=0)
    assert counts["rejected"] == len(EDGE_TIMESTAMPS)


NOT_JSON_NUMBERS = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1E+999"]


def test_numbers_json_has_not_are_rejected_not_stored(spark, fresh, tmp_path: Path) -> None:
    template = json.dumps(event_document("{id}", "u", 1) | {"amount": "{n}"})
    payloads = [template.replace('"{id}"', f'"num-{n}"').replace('"{n}"', number.decode()).encode()
                for n, number in enumerate(NOT_JSON_NUMBERS)]  # fmt: skip
    counts = _through_the_pipeline(spark, fresh, payloads, tmp_path)
    figures.record("bad input", "NaN, Infinity, 1e400", **counts, query_died=0)
    assert (counts["good"], counts["rejected"]) == (0, len(NOT_JSON_NUMBERS))
    reasons = {parse_payload(data).reason for data in payloads}  # type: ignore[union-attr]
    assert reasons == {"bad_number"}


def test_a_lone_surrogate_is_rejected_not_rewritten(spark, fresh, tmp_path: Path) -> None:
    counts = _through_the_pipeline(spark, fresh, [LONE_SURROGATE], tmp_path)
    assert counts["rejected"] == 1


@settings(max_examples=size(2, 10), database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=st.lists(_payload, min_size=20, max_size=size(60, 200)))
def test_fuzzed_payloads_never_kill_the_query(spark, fresh, tmp_path: Path, payloads: list[bytes]) -> None:
    counts = _through_the_pipeline(spark, fresh, payloads, tmp_path)
    _totals.update(counts)
    _totals["examples"] += 1
    figures.record("bad input", f"hypothesis example {_totals['examples']}", **counts, query_died=0)


# -- bad parameters: each one clear error -----------------------------------------------------------


def _cli(args: list[str], tmp_path: Path, **env: str) -> tuple[int, list[str]]:
    result = subprocess.run(
        [sys.executable, "-m", "icestream.cli", *args], capture_output=True, text=True, timeout=300,
        env={**os.environ, **env}, cwd=tmp_path, check=False,
    )  # fmt: skip
    return result.returncode, (result.stderr + result.stdout).splitlines()


def _fake_java(tmp_path: Path, version: str) -> str:
    home = tmp_path / f"java-{version}"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2018-09-25' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return str(home)


BAD_PARAMETERS = {
    "negative rate": (["produce", "--rate", "-5", "--duration", "1", "--no-progress"], {}, "rate"),
    "unknown trigger": (["ingest", "--trigger", "soon", "--available-now"], {}, "trigger"),
    "invalid identifier": (["ingest", "--available-now"], {"ICESTREAM_TABLE": "events; DROP TABLE x"}, "identifier"),
    "unreachable endpoint": (
        ["ingest", "--available-now"],
        {"ICESTREAM_KINESIS_ENDPOINT": "http://127.0.0.1:{port}"},
        "127.0.0.1",
    ),
    "missing jar": (["ingest", "--available-now"], {"ICESTREAM_ICEBERG_JARS": "/nonexistent/iceberg.jar"}, "jar"),
    "wrong java version": (["ingest", "--available-now"], {"JAVA_HOME": "{java}"}, "Java 8"),
}


@pytest.mark.parametrize("case", list(BAD_PARAMETERS))
def test_a_bad_parameter_gives_one_clear_error(request, emulator: str, tmp_path: Path, case: str) -> None:
    args, env, mention = BAD_PARAMETERS[case]
    filled = {key: value.format(port=free_port(), java=_fake_java(tmp_path, "1.8.0_292")) for key, value in env.items()}
    if case == "unreachable endpoint":  # tables that exist, so the endpoint is the only thing wrong
        filled["ICESTREAM_TABLE"] = request.getfixturevalue("fresh")(shards=1, prefix="unreach").table
    code, lines = _cli(args, tmp_path, **filled)
    errors = [line for line in lines if line.startswith("error:")]
    figures.record("bad parameters", case, exit_code=code, error_lines=len(errors),
                   traceback=int(any("Traceback" in line for line in lines)),
                   message=(errors[0][:90] if errors else lines[-1][:90] if lines else ""))  # fmt: skip
    assert code == 2, lines[-20:]
    assert len(errors) == 1, lines[-20:]
    assert mention.lower() in errors[0].lower(), errors[0]
    assert not any("Traceback" in line for line in lines), lines[-20:]


def test_an_oversized_put_record_is_refused_as_invalid_not_throttled(emulator: str) -> None:
    from botocore.exceptions import ClientError

    from icestream.config import load_settings
    from icestream.kinesis.clients import ensure_stream
    from icestream.limits import MAX_RECORD_BYTES

    stream = load_settings(stream_name=f"oversized-{uuid.uuid4().hex[:8]}")
    ensure_stream(stream, shard_count=1)
    client = kinesis_client(stream)
    with pytest.raises(ClientError) as refused:  # a throttle would be retried for ever by every SDK
        client.put_record(StreamName=stream.stream_name, Data=b"x" * (MAX_RECORD_BYTES + 1), PartitionKey="k")
    error = refused.value.response["Error"]
    figures.record("bad input", "PutRecord over 1 MiB", code=error["Code"])
    assert error["Code"] == "ValidationException", error
    assert str(MAX_RECORD_BYTES) in error["Message"]
    shard = client.list_shards(StreamName=stream.stream_name)["Shards"][0]["ShardId"]
    iterator = client.get_shard_iterator(StreamName=stream.stream_name, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    assert client.get_records(ShardIterator=iterator["ShardIterator"])["Records"] == [], "nothing stored"


# -- mistakes refused before anything is created: one error line, exit 2, no stream, no table ---------

REFUSED_BEFORE_CREATING = {
    "infinite trigger": (["ingest", "--trigger", "inf"], "trigger 'inf': use a finite time"),
    "trigger under 200 ms": (["ingest", "--trigger", "0s"], "trigger_seconds: 0 s is below 0.2 s"),
    "trigger over a minute": (["ingest", "--trigger", "10m"], "trigger_seconds: 600 s is above 60 s"),
    "no shards": (["setup", "--shards", "0"], "--shards 0: a stream has 1 to 500 shards"),
    "501 shards": (["setup", "--shards", "501"], "--shards 501: a stream has 1 to 500 shards"),
    "negative shards": (["setup", "--shards", "-1"], "--shards -1: a stream has 1 to 500 shards"),
    "a table name its companions outgrow": (["setup"], "characters, and its longest companion"),
    "a warehouse that is a file": (["setup"], "is a file, not a folder"),
    "a warehouse under a file": (["setup"], "is a file, not a folder"),
    "a warehouse under /proc": (["setup"], "cannot be written"),
    "a run folder that is a file": (["ingest", "--available-now"], "is a file, not a folder"),
    "a run folder under /proc": (["ingest", "--available-now"], "cannot be written"),
    "a config file not in UTF-8": (["--config", "{tmp}/latin1.yaml", "setup"], "is not UTF-8"),
    # issue 58: setup made the stream, then Spark found no file system for s3:// (and S3 has no atomic rename)
    "the hadoop catalog on an s3 warehouse": (["setup"], "hadoop cannot keep tables in the s3:// warehouse"),
    # issue 58: <table>_metrics_demo is notebook 07's demo table, which the demo drops and makes on every run
    "a route to a demo's table": (
        ["ingest", "--available-now", "--route", "event_type", "--route-map", "order=metrics_demo"],
        "route_tables: 'metrics_demo' names a table the workbook keeps for itself",
    ),
    # Typos (issue 58): the environment's was ignored, and papermill ran 00 with the default shard count.
    "a variable that names no setting": (["setup"], "names no setting; did you mean ICESTREAM_SHARD_COUNT?"),
    "a notebook parameter mistyped": (["run", "00", "-p", "shard_cuont", "2"], "did you mean shard_count?"),
    # Another stream's name: reset had dropped the tables that stream feeds, then made a stream of the name.
    "a reset of a stream that did not feed the tables": (["reset", "--yes"], "reset refused: "),
}
# What a case sets besides the names. The tests run as root, who may write anywhere chmod can forbid,
# so "not writable" is a folder under a regular file or under /proc. A bad run folder hides the
# emulator's state file: the endpoint is given, and the stream exists with a record, as the ingest had
# read and committed a batch before it first wrote there.
REFUSED_ENVIRONMENT = {
    "a warehouse that is a file": {"ICESTREAM_WAREHOUSE": "{tmp}/afile"},
    "a warehouse under a file": {"ICESTREAM_WAREHOUSE": "{tmp}/afile/warehouse"},
    "a warehouse under /proc": {"ICESTREAM_WAREHOUSE": "/proc/warehouse"},
    "a run folder that is a file": {"ICESTREAM_RUN_DIR": "{tmp}/afile", "ICESTREAM_KINESIS_ENDPOINT": "{endpoint}"},
    "a run folder under /proc": {"ICESTREAM_RUN_DIR": "/proc/run", "ICESTREAM_KINESIS_ENDPOINT": "{endpoint}"},
    "a variable that names no setting": {"ICESTREAM_SHARD_CONT": "3"},
    "the hadoop catalog on an s3 warehouse": {"ICESTREAM_CATALOG_TYPE": "hadoop", "ICESTREAM_WAREHOUSE": "s3://b/w"},
}


def _created(settings: Any, stream: str, table: str) -> list[str]:
    """The stream and the tables named ``table`` or ``table_*`` that exist."""
    import sqlite3

    found = [stream] if stream in kinesis_client(settings).list_streams()["StreamNames"] else []
    if settings.catalog_file.exists():
        with sqlite3.connect(f"file:{settings.catalog_file}?mode=ro", uri=True) as catalog:
            rows = catalog.execute("SELECT table_name FROM iceberg_tables WHERE table_name = ? OR table_name LIKE ?",
                                   (table, f"{table}\\_%")).fetchall()  # fmt: skip
        found += [name for (name,) in rows]
    return found


@pytest.mark.parametrize("case", list(REFUSED_BEFORE_CREATING))
def test_a_mistake_is_refused_before_anything_is_created(
    request, settings, emulator: str, tmp_path: Path, case: str
) -> None:
    args, message = REFUSED_BEFORE_CREATING[case]
    name = f"refused_{uuid.uuid4().hex[:8]}"
    if case == "a table name its companions outgrow":
        name = name.ljust(121, "x")  # a valid name; its rejects table's was not, and setup had made the rest
    stream, table = name.replace("_", "-"), name
    (tmp_path / "afile").write_text("a file where a folder should be\n")
    (tmp_path / "latin1.yaml").write_bytes("# r\u00e9glages\nshard_count: 1\n".encode("latin-1"))  # valid but for é
    fill = {"tmp": str(tmp_path), "endpoint": emulator}
    existing: list[str] = []
    if "ICESTREAM_RUN_DIR" in REFUSED_ENVIRONMENT.get(case, {}):
        assert _cli(["setup", "--shards", "1"], tmp_path, ICESTREAM_STREAM_NAME=stream, ICESTREAM_TABLE=table)[0] == 0
        there = dataclasses.replace(settings, stream_name=stream, table=table)
        record = json.dumps(event_document("run-dir-1", "u", 1)).encode()
        kinesis_client(there).put_record(StreamName=stream, Data=record, PartitionKey="k")
        existing = _created(settings, stream, table)
    if case == "a reset of a stream that did not feed the tables":  # the tables of a stream that fed them
        from icestream.ingest.positions import mark_source_stream

        feeding = f"{stream}-feeds"
        assert _cli(["setup", "--shards", "1"], tmp_path, ICESTREAM_STREAM_NAME=feeding, ICESTREAM_TABLE=table)[0] == 0
        there = dataclasses.replace(settings, stream_name=feeding, table=table)
        mark_source_stream(request.getfixturevalue("spark"), there.table_name, feeding)  # as its first batch did
        existing = _created(settings, stream, table)
    env = {key: value.format(**fill) for key, value in REFUSED_ENVIRONMENT.get(case, {}).items()}
    args = [arg.format(**fill) for arg in args]
    code, lines = _cli(args, tmp_path, ICESTREAM_STREAM_NAME=stream, ICESTREAM_TABLE=table, **env)
    errors = [line for line in lines if line.startswith("error:")]
    created = _created(settings, stream, table)
    figures.record("bad parameters", case, exit_code=code, error_lines=len(errors), created=len(created),
                   message=(errors[0][:90] if errors else lines[-1][:90] if lines else ""))  # fmt: skip
    assert (code, len(errors)) == (2, 1), lines[-20:]
    assert message in errors[0], errors[0]
    assert created == existing, "refused after creating"
    if existing:  # and before the first batch committed
        from icestream.runtime.catalog import current_metadata_location

        metadata = json.loads(Path(current_metadata_location(there).removeprefix("file:")).read_text())
        assert metadata.get("current-snapshot-id", -1) in (None, -1), "refused after a batch committed"


# -- a failure inside Spark: one error line with its cause, the traces in the driver's log file -------

FAILING_TRANSFORM = """
from pyspark.sql import functions as F
from pyspark.sql.types import StringType


def _refuse(user_id):
    raise ValueError(f"this transform cannot read {user_id}")


def refuse_every_row(events):
    return events.withColumn("user_id", F.udf(_refuse, StringType())("user_id"))
"""
SPARK_FAILURES = {
    # a user's transform that raises in the read tasks: before, 82 lines of Java trace came first
    "a transform that raises in a task": (["--transform", "spoiled_transform:refuse_every_row"],
                                          "ValueError: this transform cannot read u"),
    # the events table's folders made unwritable after setup: before, a 72-line Python and Java traceback, exit 1
    "a table folder that cannot be written": ([], "(Operation not permitted)"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SPARK_FAILURES))
def test_a_failure_inside_spark_is_one_line_with_its_cause(
    spark, settings, emulator: str, tmp_path: Path, case: str
) -> None:
    options, cause = SPARK_FAILURES[case]
    name = f"spark_fails_{uuid.uuid4().hex[:8]}"
    env = {"ICESTREAM_STREAM_NAME": name.replace("_", "-"), "ICESTREAM_TABLE": name, "PYTHONPATH": str(tmp_path),
           # a run folder of its own for its log file: the emulator's state file is elsewhere, hence the endpoint
           "ICESTREAM_RUN_DIR": str(tmp_path / "run"), "ICESTREAM_KINESIS_ENDPOINT": emulator}  # fmt: skip
    (tmp_path / "spoiled_transform.py").write_text(FAILING_TRANSFORM)
    there = dataclasses.replace(settings, stream_name=env["ICESTREAM_STREAM_NAME"], table=name)
    ensure_stream(there, shard_count=1)  # what `icestream setup --shards 1` makes, without a JVM of its own
    setup_tables(spark, there)
    record = json.dumps(event_document("spark-fails-1", "u", 1)).encode()
    kinesis_client(there).put_record(StreamName=there.stream_name, Data=record, PartitionKey="k")
    locked: list[Path] = []
    if case == "a table folder that cannot be written":  # root writes through permissions, not through +i
        table_folder = Path(there.warehouse_uri) / there.namespace / name
        locked = [table_folder / "metadata", table_folder / "data"]
        locked[1].mkdir(exist_ok=True)
        if subprocess.run(["chattr", "+i", *map(str, locked)], capture_output=True, check=False).returncode:
            pytest.skip("this file system has no immutable attribute (chattr +i)")
    try:
        code, lines = _cli(["ingest", "--available-now", *options], tmp_path, **env)
    finally:
        if locked:
            subprocess.run(["chattr", "-i", *map(str, locked)], check=True)
    log = tmp_path / "run" / "spark.log"
    figures.record("bad parameters", case, exit_code=code, terminal_lines=len(lines),
                   message=lines[0][:90] if lines else "")  # fmt: skip
    assert code == 2, lines[-20:]
    assert len(lines) == 1, lines[:20]
    assert lines[0].startswith("error:"), lines[0]
    assert cause in lines[0], lines[0]
    assert lines[0].endswith(f"Spark's whole trace: {log}"), lines[0]
    assert "\tat org.apache." in log.read_text(), "the Java trace is kept in the log file"
