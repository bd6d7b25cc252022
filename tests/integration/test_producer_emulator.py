"""The producer against the moto emulator: what is sent arrives, byte for byte, in per-user order;
``--count N`` sends exactly N in every mode (counted by a bare boto3 reader); ``--rate`` is met."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from icestream.cli import main
from icestream.config import Settings, project_home
from icestream.kinesis.clients import ensure_stream
from icestream.producer.background import (
    background_producer_status,
    start_background_producer,
    stop_background_producer,
    wait_background_producer,
)
from icestream.producer.put import produce
from icestream.producer.run import RunSummary, read_run_summary, run_production, run_summary_path
from icestream.synthetic.generator import EventGenerator, backfill_config, generate, live_config
from icestream.synthetic.ground_truth import DEFAULT_ANOMALIES, ground_truth_path, read_ground_truth
from icestream.synthetic.malformed import MALFORMED_KINDS, malformed_payload
from icestream.synthetic.wire import Record
from tests.helpers.streams import read_stream

END = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)


@pytest.fixture
def stream(stream_settings: Settings) -> Settings:
    ensure_stream(stream_settings, shard_count=2)
    return stream_settings


def test_a_backfill_arrives_complete_and_in_per_user_order(stream: Settings) -> None:
    config = backfill_config(hours=1, count=2000, end=END, seed=5, anomalies=DEFAULT_ANOMALIES, kinesis_oversized=1)
    records, generator = generate(config)
    summary = produce(stream, records, progress=False)

    assert summary.unsendable == 1
    assert summary.failed == 0
    assert summary.sent == summary.records - summary.unsendable == len(records) - 1
    arrived = read_stream(stream)
    assert sorted(r["Data"] for r in arrived) == sorted(r.data for r in records if r.kind != "kinesis_oversized")

    # Per user, clean on-time events arrive in the order they were sent, within one shard.
    sent_order = {r.data: index for index, r in enumerate(records)}
    shards_of_user: dict[str, set[str]] = defaultdict(set)
    positions: dict[str, list[int]] = defaultdict(list)
    on_time = {r.data for r in records if r.kind == "event" and not r.late}
    for record in arrived:
        shards_of_user[record["PartitionKey"]].add(record["shard"])
        if record["Data"] in on_time:
            positions[record["PartitionKey"]].append(sent_order[record["Data"]])
    assert all(len(shards) == 1 for shards in shards_of_user.values())
    assert all(order == sorted(order) for order in positions.values())
    assert {r["PartitionKey"] for r in arrived if r["Data"] in on_time} <= {f"u-{n:05d}" for n in range(5000)}
    assert generator.summary()["records"] == len(records)


def test_malformed_payloads_arrive_byte_for_byte(stream: Settings) -> None:
    records = [Record(malformed_payload(kind), f"k-{kind}", kind, 0.0, 0.0) for kind in MALFORMED_KINDS]
    summary = produce(stream, records, progress=False)
    assert summary.sent == len(MALFORMED_KINDS)
    arrived = {record["PartitionKey"]: record["Data"] for record in read_stream(stream)}
    assert arrived == {record.partition_key: record.data for record in records}


def test_cli_sends_the_sample_file(stream: Settings, tmp_path: Any) -> None:
    sample = project_home() / "data" / "samples" / "events.jsonl"
    summary_file = tmp_path / "summary.json"
    code = main(["produce", "--stream", stream.stream_name, "--from-file", str(sample), "--no-progress",
                 "--summary-file", str(summary_file)])  # fmt: skip
    assert code == 0
    lines = sample.read_bytes().splitlines()
    assert json.loads(summary_file.read_text())["producer"]["sent"] == len(lines)
    assert sorted(r["Data"] for r in read_stream(stream)) == sorted(lines)


def test_cli_backfill_writes_ground_truth_and_summary(stream: Settings, tmp_path: Any) -> None:
    summary_file = tmp_path / "summary.json"
    code = main(["produce", "--stream", stream.stream_name, "--backfill-hours", "1", "--count", "1500",
                 "--seed", "3", "--no-progress", "--summary-file", str(summary_file)])  # fmt: skip
    assert code == 0
    result = json.loads(summary_file.read_text())
    assert result["producer"]["sent"] == result["generator"]["records"] == len(read_stream(stream)) == 1500
    assert json.loads(run_summary_path(stream, "backfill").read_text()) == result
    assert read_run_summary(run_summary_path(stream, "backfill")).producer.sent == result["producer"]["sent"]
    truth = read_ground_truth(ground_truth_path(stream))
    assert [a.kind for a in truth] == ["spike", "drop", "burst"]


def test_run_production_records_counts(stream: Settings, tmp_path: Any) -> None:
    generator = EventGenerator(backfill_config(hours=0.5, count=300, end=END, seed=9, anomalies=()))
    result = run_production(stream, generator, mode="backfill", generator=generator, progress=False,
                            summary_file=tmp_path / "s.json")  # fmt: skip
    assert result.producer.sent == result.generator["records"]
    assert json.loads((tmp_path / "s.json").read_text()) == json.loads(json.dumps(result.as_dict()))


def test_background_producer_runs_for_its_duration_and_reports(stream: Settings) -> None:
    started = start_background_producer(stream, rate=40.0, duration=3.0, seed=1)
    assert started.running
    assert started.pid
    status = wait_background_producer(stream, timeout=60)
    assert not status.running
    assert status.summary is not None, status.detail
    sent = status.summary.producer.sent
    assert sent > 0
    assert status.summary.producer.failed == 0
    assert status.summary.mode == "live"
    assert len(read_stream(stream)) == sent
    assert stop_background_producer(stream) is False  # it has ended by itself


def test_background_producer_stops_on_request_and_writes_its_summary(stream: Settings) -> None:
    start_background_producer(stream, rate=40.0, duration=120.0, seed=2)
    assert wait_background_producer(stream, timeout=2.0).running
    assert stop_background_producer(stream) is True
    status = background_producer_status(stream)
    assert not status.running
    assert status.summary is not None
    assert status.summary.producer.stopped_early is True


COUNT = 5000


def payload_file(path: Path, lines: int) -> Path:
    """A JSON-lines file of ``lines`` generated payloads."""
    records, _ = generate(backfill_config(hours=1, records=lines, end=END, seed=21))
    path.write_bytes(b"".join(record.data + b"\n" for record in records))
    return path


def as_event(record: dict[str, Any]) -> dict[str, Any] | None:
    """The event a record holds, or None for a malformed one (which the ingest would reject)."""
    try:
        event = json.loads(record["Data"])
    except ValueError:
        return None
    return event if isinstance(event, dict) and isinstance(event.get("properties"), dict) else None


def cli_run(stream: Settings, mode: str, tmp_path: Path) -> RunSummary:
    """Run ``icestream produce --count 5000`` in ``mode``; return the run's summary once it has ended."""
    common = ["produce", "--stream", stream.stream_name, "--count", str(COUNT), "--seed", "4", "--no-progress"]
    if mode == "background":
        assert main([*common, "--background"]) == 0
        status = wait_background_producer(stream, timeout=120)
        assert status.summary is not None, status.detail
        return status.summary
    extra = {
        "live": [],  # no --rate: the stream's write limit (2 shards: 2,000 records/s)
        "backfill": ["--backfill-hours", "1"],
        "file": ["--from-file", str(payload_file(tmp_path / "payloads.jsonl", COUNT + 700))],
    }[mode]
    summary_file = tmp_path / "summary.json"
    assert main([*common, *extra, "--summary-file", str(summary_file)]) == 0
    summary = read_run_summary(summary_file)
    assert summary is not None
    return summary


@pytest.mark.parametrize("mode", ["live", "backfill", "file", "background"])
def test_count_sends_exactly_that_many_records_in_every_mode(stream: Settings, tmp_path: Path, mode: str) -> None:
    summary = cli_run(stream, mode, tmp_path)
    arrived = read_stream(stream)
    sent = summary.producer
    assert len(arrived) == sent.sent == COUNT, f"{len(arrived)} of {COUNT} arrived"
    assert sent.records == sent.sent + sent.failed + sent.unsendable + sent.unsent == COUNT
    assert not sent.stopped_early
    if summary.generator is not None:
        assert summary.generator["records"] == COUNT, "generated = sent: nothing held back"
        events = [event for event in map(as_event, arrived) if event is not None]
        assert len(events) > 0.95 * COUNT
        assert {event["properties"]["run_id"] for event in events} == {summary.run_id}
    if mode == "file":
        lines = [line for line in (tmp_path / "payloads.jsonl").read_bytes().splitlines() if line]
        assert sorted(r["Data"] for r in arrived) == sorted(lines[:COUNT]), "the file's first payloads"


def test_late_events_are_sent_before_a_live_run_ends(stream: Settings) -> None:
    config = live_config(2000.0, records=COUNT, seed=6, late_rate=0.2, late_seconds=(0.5, 3.0))
    generator = EventGenerator(config)
    taken: list[Record] = []

    def tap(records: Iterable[Record]) -> Iterator[Record]:
        for record in records:
            taken.append(record)
            yield record

    summary = run_production(stream, tap(generator), mode="live", generator=generator, pace=True, progress=False)
    arrived = read_stream(stream)
    assert len(arrived) == summary.producer.sent == summary.generator["records"] == COUNT
    late = {record.data for record in taken if record.late}
    assert len(late) > 0.1 * COUNT
    assert late <= {record["Data"] for record in arrived}, "every late event arrived"
    # Late relative to newer events: in its shard, a late event follows events with later event times.
    newest: dict[str, float] = defaultdict(float)
    after_newer = 0
    event_time = {record.data: record.event_ts for record in taken if record.kind == "event"}
    for record in arrived:
        ts = event_time.get(record["Data"])
        if ts is None:
            continue
        after_newer += record["Data"] in late and ts < newest[record["shard"]]
        newest[record["shard"]] = max(newest[record["shard"]], ts)
    assert after_newer > 0.8 * len(late)
