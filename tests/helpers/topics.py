"""Records sent to a Kafka topic with confluent-kafka's own producer (no icestream producer)."""

from __future__ import annotations

from icestream.config import Settings
from icestream.kafka.connection import kafka_connection

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
