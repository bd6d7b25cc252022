"""``icestream produce --to kafka`` against the session's real broker: what the generator made arrives, keyed by user.

Each run is read back with a plain confluent-kafka consumer and compared with the records the generator
makes for the run's own configuration (rebuilt from its summary: the run id, a digest of that
configuration, proves it is the same), that is, with what the Kinesis path sends for the same seed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from icestream.cli import build_parser, main
from icestream.config import Settings
from icestream.kafka.connection import kafka_connection
from icestream.kafka.topics import offsets
from icestream.producer.background import wait_background_producer
from icestream.producer.run import RunSummary, read_run_summary, run_summary_path
from icestream.synthetic.generator import RUN_ID_PROPERTY, EventGenerator, backfill_config
from icestream.synthetic.ground_truth import ground_truth_path, parse_anomalies, read_ground_truth
from icestream.synthetic.wire import Record
from tests.helpers.topics import consume

COUNT = 1500


def produce(settings: Settings, *words: str) -> tuple[int, RunSummary | None]:
    """``icestream produce --to kafka --topic <the settings' topic> WORDS --no-progress``: exit code and summary."""
    arguments = ["produce", "--to", "kafka", "--topic", settings.kafka_topic, *words, "--no-progress"]
    code = main(arguments)
    mode = "backfill" if "--backfill-hours" in words else "live"
    return code, read_run_summary(run_summary_path(settings, mode))


def run_ids(values: list[bytes]) -> set[str]:
    """The run ids the events among ``values`` carry (malformed records carry none)."""
    found = set()
    for value in values:
        try:
            event = json.loads(value)
        except ValueError:
            continue
        properties = event.get("properties") if isinstance(event, dict) else None
        if isinstance(properties, dict) and RUN_ID_PROPERTY in properties:
            found.add(properties[RUN_ID_PROPERTY])
    return found


def rebuilt(summary: RunSummary, *words: str) -> list[Record]:
    """The records of a backfill's configuration, from the command's words and the window in its summary."""
    args = build_parser().parse_args(["produce", *words])
    assert summary.window_end is not None
    config = backfill_config(
        args.backfill_hours,
        records=args.count,
        end=summary.window_end,
        seed=args.seed,
        anomalies=parse_anomalies(args.anomalies or "default"),
        bad_rate=args.bad_rate,
        duplicate_rate=args.duplicate_rate,
        late_rate=args.late_rate,
    )
    generator = EventGenerator(config)
    assert generator.run_id == summary.run_id, "the same configuration as the run's"
    return list(generator)


def test_a_backfill_arrives_keyed_by_user_in_per_user_order_as_generated(kafka_fresh) -> None:
    settings = kafka_fresh(partitions=3, prefix="produce", tables=False)
    words = ("--backfill-hours", "1", "--count", str(COUNT), "--seed", "3")
    code, summary = produce(settings, *words)
    assert code == 0
    assert summary is not None
    assert (summary.target, summary.stream, summary.mode) == ("kafka", settings.kafka_topic, "backfill")
    sent = summary.producer
    assert sent.sent == sent.records == COUNT
    assert (sent.failed, sent.unsendable, sent.unsent) == (0, 0, 0)

    arrived = consume(kafka_connection(settings), COUNT, group=f"check-{settings.kafka_topic}")
    assert len(arrived) == sent.sent
    assert sum(part.high - part.low for part in offsets(kafka_connection(settings)).values()) == COUNT, "no more"

    records = rebuilt(summary, *words)
    assert sorted((key, value) for _, _, key, value in arrived) == sorted(
        (record.partition_key.encode(), record.data) for record in records
    ), "every key is its record's partition key, every value its bytes"
    partitions_of_key: dict[bytes, set[int]] = defaultdict(set)
    read_in_order: dict[bytes, list[bytes]] = defaultdict(list)
    for partition, _, key, value in sorted(arrived):  # by partition, then offset
        partitions_of_key[key].add(partition)
        read_in_order[key].append(value)
    assert len(partitions_of_key) > 10
    assert all(len(found) == 1 for found in partitions_of_key.values()), "a key always lands on one partition"
    assert len({partition for found in partitions_of_key.values() for partition in found}) == 3
    sent_in_order: dict[bytes, list[bytes]] = defaultdict(list)
    for record in records:
        sent_in_order[record.partition_key.encode()].append(record.data)
    assert read_in_order == sent_in_order, "each user's records in the order they were generated"

    assert sum(record.kind == "event" for record in records) > 0.9 * COUNT
    assert run_ids([value for *_, value in arrived]) == {summary.run_id}
    assert summary.ground_truth == ground_truth_path(settings)
    assert list(summary.anomalies) == read_ground_truth(summary.ground_truth)
    assert [anomaly.kind for anomaly in summary.anomalies] == ["spike", "drop", "burst"]


def test_live_and_background_runs_send_exactly_their_count(kafka_fresh) -> None:
    settings = kafka_fresh(partitions=2, prefix="produce", tables=False)
    code, live = produce(settings, "--count", "200", "--rate", "1000", "--seed", "5")
    assert code == 0
    assert live is not None
    assert (live.target, live.producer.sent, live.producer.records) == ("kafka", 200, 200)
    run_summary_path(settings, "live").unlink()
    background = ["--to", "kafka", "--topic", settings.kafka_topic, "--background", "--count", "100", "--rate", "200"]
    assert main(["produce", *background, "--seed", "6", "--no-progress"]) == 0
    status = wait_background_producer(settings, timeout=120)
    assert status.summary is not None, status.detail
    assert (status.summary.target, status.summary.stream) == ("kafka", settings.kafka_topic)
    assert status.summary.producer.sent == 100
    arrived = consume(kafka_connection(settings), 300, group=f"check-{settings.kafka_topic}")
    assert len(arrived) == 300
    assert run_ids([value for *_, value in arrived]) == {live.run_id, status.summary.run_id}
    assert live.run_id != status.summary.run_id


def test_a_missing_topic_is_one_line_and_nothing_is_sent(
    kafka_broker: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    words = ["--to", "kafka", "--topic", "no-such-topic", "--backfill-hours", "1", "--count", "10", "--no-progress"]
    code = main(["produce", *words, "--summary-file", str(tmp_path / "summary.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: Kafka topic no-such-topic does not exist on {kafka_broker}."), err
    assert "icestream setup --kafka" in err
    assert err.count("\n") == 1, err
    assert not (tmp_path / "summary.json").exists()
