"""Where a run sends: the same records, run id, ground truth and summary to Kinesis or to Kafka."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from icestream.config import Settings, load_settings
from icestream.errors import ConfigError
from icestream.producer import kafka_send
from icestream.producer.aggregate import Aggregator
from icestream.producer.kafka_send import KafkaSender
from icestream.producer.put import Producer
from icestream.producer.run import RunSummary, read_run_summary, run_production, run_summary_path
from icestream.producer.summary import ProduceSummary
from icestream.producer.target import check_target, destination, open_sender
from icestream.synthetic.generator import EventGenerator, backfill_config
from icestream.synthetic.ground_truth import DEFAULT_ANOMALIES, ground_truth_path, read_ground_truth
from tests.helpers.fake_kafka import FakeKafkaProducer
from tests.helpers.fake_kinesis import AcceptingKinesis

END = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)


@pytest.fixture
def run_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path))
    monkeypatch.setattr(kafka_send, "partitions", lambda connection: [0, 1])
    return load_settings(kafka_bootstrap="127.0.0.1:9", kafka_topic="clicks")


def test_an_unknown_target_is_refused_naming_both() -> None:
    assert check_target("kafka") == "kafka"
    with pytest.raises(ConfigError, match="--to 'kinesiss': send to one of kinesis, kafka"):
        check_target("kinesiss")


def test_each_target_has_its_sender_and_destination(run_settings: Settings) -> None:
    kinesis = open_sender(run_settings, "kinesis", AcceptingKinesis())
    kafka = open_sender(run_settings, "kafka", FakeKafkaProducer())
    assert isinstance(kinesis, Producer)
    assert isinstance(kafka, KafkaSender)
    assert (kinesis.destination, kafka.destination) == (run_settings.stream_name, "clicks")
    assert kafka.connection.bootstrap == "127.0.0.1:9"
    assert destination(run_settings, "kafka") == "clicks"


def test_no_broker_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICESTREAM_KAFKA_BOOTSTRAP", raising=False)
    settings = load_settings(run_dir=str(tmp_path))  # no local broker has ever run in this folder
    with pytest.raises(ConfigError, match="No Kafka broker: start the local one with `icestream kafka start`"):
        open_sender(settings, "kafka")


def test_a_kafka_run_sends_what_a_kinesis_run_sends_and_writes_the_same_summary(run_settings: Settings) -> None:
    runs, sent = {}, {}
    for to, client in (("kinesis", AcceptingKinesis()), ("kafka", FakeKafkaProducer())):
        generator = EventGenerator(backfill_config(hours=1, records=400, end=END, seed=4, anomalies=DEFAULT_ANOMALIES))
        runs[to] = run_production(run_settings, generator, mode="backfill", generator=generator, client=client,
                                  to=to, progress=False)  # fmt: skip
        sent[to] = client.data if isinstance(client, AcceptingKinesis) else [value for *_, value in client.delivered]
    assert sent["kafka"] == sent["kinesis"]
    assert len(sent["kafka"]) == 400
    kinesis, kafka = runs["kinesis"], runs["kafka"]
    assert (kinesis.target, kinesis.stream) == ("kinesis", run_settings.stream_name)
    assert (kafka.target, kafka.stream) == ("kafka", "clicks")
    assert kafka.producer.sent == kafka.generator["records"] == 400
    for same in ("run_id", "seed", "window_start", "window_end", "generator"):
        assert getattr(kafka, same) == getattr(kinesis, same), same
    assert kafka.anomalies == kinesis.anomalies
    assert len(kafka.anomalies) == 3
    assert list(kafka.anomalies) == read_ground_truth(ground_truth_path(run_settings))
    assert kafka.run_id.startswith("run-"), "the same seed and window: the same run id"
    written = read_run_summary(run_summary_path(run_settings, "backfill"))
    assert written is not None
    assert (written.target, written.stream, written.run_id) == ("kafka", "clicks", kafka.run_id)


def test_kpl_aggregation_is_refused_for_kafka_compression_is_not(run_settings: Settings) -> None:
    records = list(EventGenerator(backfill_config(hours=0.1, records=20, end=END, seed=1)))
    with pytest.raises(ConfigError, match="KPL aggregation packs records for Kinesis"):
        run_production(run_settings, records, mode="file", client=FakeKafkaProducer(), to="kafka",
                       aggregator=Aggregator(per_aggregate=5), progress=False)  # fmt: skip
    client = FakeKafkaProducer()
    run = run_production(run_settings, records, mode="file", client=client, to="kafka",
                         aggregator=Aggregator(compression="gzip"), progress=False)  # fmt: skip
    assert run.producer.sent == 20
    assert all(value[:2] == b"\x1f\x8b" for *_, value in client.delivered), "gzip's magic number"


def test_a_summary_written_before_kafka_was_a_target_reads_as_kinesis() -> None:
    values = RunSummary("file", "user-events", 0.0, ProduceSummary(sent=3)).as_dict()
    assert values.pop("target") == "kinesis"
    again = RunSummary.from_dict(values)
    assert (again.target, again.stream, again.producer.sent) == ("kinesis", "user-events", 3)
