"""The Kafka sender: keyed by the partition key, every delivery report counted, refusals one clear error."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import KafkaError

from icestream.errors import ConfigError, ServiceUnavailableError
from icestream.kafka.connection import KafkaConnection
from icestream.producer import kafka_send
from icestream.producer.kafka_send import KafkaSender, producer_config
from icestream.synthetic.generator import EventGenerator, backfill_config
from icestream.synthetic.wire import Record
from tests.helpers.fake_kafka import FakeKafkaProducer

END = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
CONNECTION = KafkaConnection("127.0.0.1:9", "user-events")


@pytest.fixture(autouse=True)
def _the_topic_exists(monkeypatch: pytest.MonkeyPatch) -> list[KafkaConnection]:
    asked: list[KafkaConnection] = []
    monkeypatch.setattr(kafka_send, "partitions", lambda connection: asked.append(connection) or [0, 1])
    return asked


def generated(count: int = 300, seed: int = 3) -> list[Record]:
    return list(EventGenerator(backfill_config(hours=0.2, records=count, end=END, seed=seed)))


def test_each_record_goes_keyed_by_its_partition_key_and_every_delivery_is_counted() -> None:
    records = generated()
    client = FakeKafkaProducer()
    summary = KafkaSender(CONNECTION, client).send(records, progress=False)
    assert client.delivered == [("user-events", r.partition_key.encode(), r.data) for r in records]
    assert summary.records == summary.sent == len(records) == 300
    assert (summary.failed, summary.unsendable, summary.unsent) == (0, 0, 0)
    assert summary.bytes_sent == sum(record.size for record in records)
    assert summary.sent_by_kind == dict(Counter(record.kind for record in records))
    assert len(summary.sent_by_kind) > 1, "events and malformed records, at least"


def test_a_record_whose_delivery_fails_is_counted_with_its_error_and_the_rest_are_sent() -> None:
    records = generated()
    key = records[0].partition_key.encode()
    client = FakeKafkaProducer(errors={key: KafkaError.NOT_ENOUGH_REPLICAS})
    summary = KafkaSender(CONNECTION, client).send(records, progress=False)
    failing = [record for record in records if record.partition_key.encode() == key]
    assert summary.failed == len(failing) > 0
    assert summary.sent == len(records) - len(failing)
    assert summary.records == summary.sent + summary.failed
    assert {failure.error_code for failure in summary.failures} == {"NOT_ENOUGH_REPLICAS"}
    assert [failure.event_id for failure in summary.failures] == [record.event_id for record in failing]


def test_a_record_the_client_refuses_as_too_large_is_unsendable_not_lost() -> None:
    records = [Record(b"x" * size, f"u-{n}", "event", 0.0, 0.0) for n, size in enumerate((10, 5000, 20))]
    client = FakeKafkaProducer(max_value_bytes=1000)
    summary = KafkaSender(CONNECTION, client).send(records, progress=False)
    assert (summary.records, summary.sent, summary.unsendable) == (3, 2, 1)
    assert [(f.partition_key, f.error_code) for f in summary.failures] == [("u-1", "MSG_SIZE_TOO_LARGE")]
    assert [value for _, _, value in client.delivered] == [records[0].data, records[2].data]


def test_a_queue_full_at_first_waits_for_a_poll_then_sends() -> None:
    class FullOnce(FakeKafkaProducer):
        def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any) -> None:
            if not self.full:
                self.full += 1
                raise BufferError("Local: Queue full")
            super().produce(topic, value, key, on_delivery)

    client = FullOnce()
    summary = KafkaSender(CONNECTION, client).send(generated(20), progress=False)
    assert (client.full, summary.sent) == (1, 20)


def test_a_cluster_that_takes_none_of_the_records_is_one_clear_error() -> None:
    records = generated(20)
    client = FakeKafkaProducer(errors={r.partition_key.encode(): KafkaError._MSG_TIMED_OUT for r in records})
    with pytest.raises(ServiceUnavailableError, match=r"Kafka at 127\.0\.0\.1:9 took none of 20 records"):
        KafkaSender(CONNECTION, client).send(records, progress=False)


def test_records_never_reported_are_counted_failed_and_said() -> None:
    with pytest.raises(ServiceUnavailableError, match="no delivery report for 20 records"):
        KafkaSender(CONNECTION, FakeKafkaProducer(silent=True)).send(generated(20), progress=False)


def test_a_missing_topic_is_refused_before_a_record_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(connection: KafkaConnection) -> list[int]:
        raise ConfigError(f"Kafka topic {connection.topic} does not exist on {connection.bootstrap}.")

    monkeypatch.setattr(kafka_send, "partitions", missing)
    taken: list[Record] = []

    def records() -> Any:
        for record in generated(5):
            taken.append(record)
            yield record

    client = FakeKafkaProducer()
    with pytest.raises(ConfigError, match="Kafka topic user-events does not exist"):
        KafkaSender(CONNECTION, client).send(records(), progress=False)
    assert (taken, client.delivered) == ([], [])


def test_a_stop_ends_a_kafka_run_as_it_ends_a_kinesis_one() -> None:
    sender = KafkaSender(CONNECTION, FakeKafkaProducer())

    def records() -> Any:
        for number, record in enumerate(generated(30)):
            if number == 10:
                sender.stop()
            yield record

    summary = sender.send(records(), progress=False)
    assert summary.stopped_early
    assert (summary.records, summary.sent, summary.unsent) == (11, 10, 1)


def test_the_producer_waits_for_every_replica_never_writes_twice_and_lingers_briefly() -> None:
    config = producer_config(CONNECTION)
    assert config["acks"] == "all"
    assert config["enable.idempotence"] is True
    assert 0 < config["linger.ms"] <= 100
    assert config["message.timeout.ms"] == kafka_send.DELIVERY_TIMEOUT_SECONDS * 1000
    assert config["bootstrap.servers"] == "127.0.0.1:9"
