"""Records sent to a Kafka topic with confluent-kafka's own producer (no icestream producer), and read back."""

from __future__ import annotations

from icestream.config import Settings
from icestream.kafka.connection import KafkaConnection, kafka_connection
from icestream.kafka.topics import partitions

FLUSH_SECONDS = 60.0  # a bound on delivery to the local broker, not a measurement


def send(settings: Settings, records: list[tuple[bytes, str]]) -> list[tuple[int, int]]:
    """Send (payload, key) records to the settings' topic, in order; return each one's (partition, offset)."""
    import confluent_kafka

    connection = kafka_connection(settings)
    producer = confluent_kafka.Producer(connection.client_config(**{"enable.idempotence": True, "linger.ms": 5}))
    placed: list[tuple[int, int] | None] = [None] * len(records)

    def delivered(index: int):
        def report(error, message) -> None:
            assert error is None, error
            placed[index] = (message.partition(), message.offset())

        return report

    for index, (data, key) in enumerate(records):
        producer.produce(connection.topic, value=data, key=key.encode(), on_delivery=delivered(index))
        producer.poll(0)
    assert producer.flush(FLUSH_SECONDS) == 0, "records left undelivered"
    assert all(place is not None for place in placed)
    return [place for place in placed if place is not None]


def consume(connection: KafkaConnection, count: int, group: str) -> list[tuple[int, int, bytes, bytes]]:
    """Read ``count`` records of the connection's topic from its start (``group`` names the reader in the broker's log).

    Returns:
        Each record's (partition, offset, key, value), in the order read (offsets rise within a partition).
    """
    import time

    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        connection.client_config(**{"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    )
    # Assigned, not subscribed: every partition from its start, with no group to join first.
    first = confluent_kafka.OFFSET_BEGINNING
    consumer.assign([confluent_kafka.TopicPartition(connection.topic, part, first) for part in partitions(connection)])
    found: list[tuple[int, int, bytes, bytes]] = []
    deadline = time.monotonic() + FLUSH_SECONDS  # a bound on waiting, not a measurement
    try:
        while len(found) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            found.append((message.partition(), message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return found


def group_offsets(connection: KafkaConnection, group: str, topic: str | None = None) -> dict[int, int]:
    """The offsets consumer group ``group`` has committed on the topic, by partition (absent: none committed)."""
    import confluent_kafka

    name = topic or connection.topic
    consumer = confluent_kafka.Consumer(connection.client_config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        asked = [confluent_kafka.TopicPartition(name, part) for part in partitions(connection, name)]
        return {found.partition: found.offset for found in consumer.committed(asked, timeout=30) if found.offset >= 0}
    finally:
        consumer.close()


def delete_groups(connection: KafkaConnection, containing: str) -> tuple[list[str], list[str]]:
    """Delete every consumer group whose id contains ``containing``; return the ids deleted and those still in use.

    A group is deleted only once it has no members: one that a SIGKILLed process had joined keeps its member
    until the broker's session timeout ends it (45 s), so a caller asks again until none is left in use.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(connection.client_config())
    listed = admin.list_consumer_groups(request_timeout=30).result()
    names = sorted(group.group_id for group in listed.valid if containing in group.group_id)
    deleted, in_use = [], []
    for name, future in (admin.delete_consumer_groups(names, request_timeout=30) if names else {}).items():
        try:
            future.result()
            deleted.append(name)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.NON_EMPTY_GROUP:
                raise
            in_use.append(name)
    return deleted, in_use
