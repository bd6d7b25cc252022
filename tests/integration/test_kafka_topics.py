"""The driver's questions of a topic, against the session's real broker: partitions, offsets, growth, absence."""

from __future__ import annotations

import confluent_kafka
import pytest

from icestream.errors import ConfigError
from icestream.kafka.connection import kafka_connection
from icestream.kafka.topics import add_partitions, ensure_topic, offsets, partitions
from tests.helpers.waiting import wait_until

METADATA_WAIT_SECONDS = 30.0  # a bound on the broker's metadata catching up, not a measurement


def test_a_topic_answers_its_partitions_and_offsets_and_grows(kafka_fresh) -> None:
    settings = kafka_fresh(partitions=2)
    connection = kafka_connection(settings)
    assert partitions(connection) == [0, 1]
    assert ensure_topic(connection, 5) is False  # an existing topic is left as it is
    producer = confluent_kafka.Producer(connection.client_config())
    for number in range(5):
        producer.produce(connection.topic, key=b"k%d" % number, value=b"v", partition=number % 2)
    assert producer.flush(30) == 0
    found = offsets(connection)
    assert {partition: (found[partition].low, found[partition].high) for partition in found} == {0: (0, 3), 1: (0, 2)}
    add_partitions(connection, 3)
    wait_until(lambda: partitions(connection) == [0, 1, 2], METADATA_WAIT_SECONDS, message="the third partition")


def test_a_missing_topic_is_one_clear_error(kafka_fresh) -> None:
    connection = kafka_connection(kafka_fresh())
    with pytest.raises(ConfigError, match="Kafka topic no-such-topic does not exist"):
        partitions(connection, "no-such-topic")
