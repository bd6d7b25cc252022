"""Topics on the driver: made, grown, and their offsets asked, through confluent-kafka's clients.

Spark's Kafka source reads a topic; these are the few questions icestream asks of it beside Spark:
whether the topic exists (a missing one is a clear error, never an empty read), which partitions it
has now (partitions added mid-run are read from their first record), and each partition's first and
next offsets (where a batch may start and where it ends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icestream.errors import ConfigError, ServiceUnavailableError
from icestream.kafka.connection import KafkaConnection

TIMEOUT_SECONDS = 30.0  # a metadata or offsets answer; a broker that takes longer is not answering


@dataclass(frozen=True)
class PartitionOffsets:
    """A partition's offsets now: ``low`` the first still kept (retention), ``high`` the next to be written."""

    partition: int
    low: int
    high: int


def _admin(connection: KafkaConnection) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(connection.client_config())


def _unreachable(connection: KafkaConnection, error: object) -> ServiceUnavailableError:
    return ServiceUnavailableError(
        f"Kafka at {connection.bootstrap} does not answer ({error}). "
        "Check `icestream kafka status`, or ICESTREAM_KAFKA_BOOTSTRAP."
    )


def partitions(connection: KafkaConnection, topic: str | None = None) -> list[int]:
    """The topic's partition ids now, in order.

    Raises:
        ConfigError: If the topic does not exist.
        ServiceUnavailableError: If the cluster does not answer.
    """
    from confluent_kafka import KafkaError, KafkaException

    name = topic or connection.topic
    try:
        metadata = _admin(connection).list_topics(topic=name, timeout=TIMEOUT_SECONDS)
    except KafkaException as error:
        raise _unreachable(connection, error) from None
    found = metadata.topics.get(name)
    if found is None or (found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise ConfigError(
            f"Kafka topic {name} does not exist on {connection.bootstrap}. Create it with `icestream setup --kafka` "
            "(or your cluster's tools)."
        )
    if found.error is not None:
        raise _unreachable(connection, found.error)
    return sorted(found.partitions)


def offsets(connection: KafkaConnection, topic: str | None = None) -> dict[int, PartitionOffsets]:
    """Each partition's first kept and next offset (``get_watermark_offsets``), by partition id.

    Raises:
        ConfigError: If the topic does not exist.
        ServiceUnavailableError: If the cluster does not answer.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    name = topic or connection.topic
    ids = partitions(connection, name)
    consumer = Consumer(connection.client_config(**{"group.id": "icestream-offsets", "enable.auto.commit": False}))
    try:
        found = {}
        for partition in ids:
            low, high = consumer.get_watermark_offsets(TopicPartition(name, partition), timeout=TIMEOUT_SECONDS)
            found[partition] = PartitionOffsets(partition, low, high)
        return found
    except KafkaException as error:
        raise _unreachable(connection, error) from None
    finally:
        consumer.close()


def ensure_topic(connection: KafkaConnection, partition_count: int, topic: str | None = None) -> bool:
    """Create the topic with ``partition_count`` partitions unless it exists; True when it was made.

    An existing topic is left as it is (its partitions are never changed here: see :func:`add_partitions`).

    Raises:
        ServiceUnavailableError: If the cluster does not answer or refuses.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    name = topic or connection.topic
    replication = min(3, _broker_count(connection))  # one on the local broker, three on MSK
    admin = _admin(connection)  # held while the future is pending: a collected client cancels it
    future = admin.create_topics([NewTopic(name, partition_count, replication)])[name]
    try:
        future.result(TIMEOUT_SECONDS)
    except KafkaException as error:
        if error.args and error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise _unreachable(connection, error) from None
    return True


def add_partitions(connection: KafkaConnection, total: int, topic: str | None = None) -> None:
    """Grow the topic to ``total`` partitions (Kafka never removes one).

    Raises:
        ServiceUnavailableError: If the cluster does not answer or refuses.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewPartitions

    name = topic or connection.topic
    admin = _admin(connection)  # held while the future is pending
    future = admin.create_partitions([NewPartitions(name, total)])[name]
    try:
        future.result(TIMEOUT_SECONDS)
    except KafkaException as error:
        raise _unreachable(connection, error) from None


def _broker_count(connection: KafkaConnection) -> int:
    from confluent_kafka import KafkaException

    try:
        return len(_admin(connection).list_topics(timeout=TIMEOUT_SECONDS).brokers)
    except KafkaException as error:
        raise _unreachable(connection, error) from None


def incarnation(connection: KafkaConnection, topic: str | None = None) -> str:
    """The topic's id (a UUID Kafka gives each topic it creates) as a decimal number.

    It tells one topic from another of the same name, deleted and made again, whose offsets start over:
    the ingest records it with every commit, where it records a Kinesis stream's creation time.

    Raises:
        ConfigError: If the topic does not exist.
        ServiceUnavailableError: If the cluster does not answer.
    """
    from confluent_kafka import KafkaError, KafkaException, TopicCollection

    name = topic or connection.topic
    admin = _admin(connection)
    future = admin.describe_topics(TopicCollection([name]))[name]
    try:
        described = future.result(TIMEOUT_SECONDS)
    except KafkaException as error:
        if error.args and error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            partitions(connection, name)  # raises the one error of a missing topic
        raise _unreachable(connection, error) from None
    topic_id = described.topic_id
    high, low = topic_id.get_most_significant_bits(), topic_id.get_least_significant_bits()
    return str(((high & 0xFFFFFFFFFFFFFFFF) << 64) | (low & 0xFFFFFFFFFFFFFFFF))


def offsets_at(connection: KafkaConnection, moment: float, ids: list[int], topic: str | None = None) -> dict[int, int]:
    """Per partition, the first offset whose record's timestamp is at or after ``moment`` (epoch seconds).

    A partition with no such record answers its next offset (what arrives later is after ``moment``).

    Raises:
        ServiceUnavailableError: If the cluster does not answer.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    name = topic or connection.topic
    consumer = Consumer(connection.client_config(**{"group.id": "icestream-offsets", "enable.auto.commit": False}))
    try:
        asked = [TopicPartition(name, partition, int(moment * 1000)) for partition in ids]
        found = consumer.offsets_for_times(asked, timeout=TIMEOUT_SECONDS)
        answer = {}
        for part in found:
            if part.error is not None:
                raise _unreachable(connection, part.error)
            offset = part.offset
            if offset < 0:  # no record at or after the moment: the partition's end
                offset = consumer.get_watermark_offsets(TopicPartition(name, part.partition), TIMEOUT_SECONDS)[1]
            answer[part.partition] = offset
        return answer
    except KafkaException as error:
        raise _unreachable(connection, error) from None
    finally:
        consumer.close()
