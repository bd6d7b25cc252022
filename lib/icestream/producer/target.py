"""Where a production run sends: a Kinesis stream (the default) or a Kafka topic, and the sender for each.

The records, the run id, the ground truth and the run's summary are the same whichever the target:
only the sender differs (:class:`~icestream.producer.put.Producer`, PutRecords to
``settings.stream_name``; :class:`~icestream.producer.kafka_send.KafkaSender`, confluent-kafka to
``settings.kafka_topic``), both a :class:`~icestream.producer.send_loop.SendLoop`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icestream.config import Settings
from icestream.errors import ConfigError

if TYPE_CHECKING:  # the senders import their clients' libraries; the command line's parser needs only the names
    from icestream.producer.send_loop import SendLoop

KINESIS, KAFKA = "kinesis", "kafka"
TARGETS = (KINESIS, KAFKA)
_SERVICE = {KINESIS: "Kinesis", KAFKA: "Kafka"}


def check_target(to: str) -> str:
    """``to`` itself when it names a target.

    Raises:
        ConfigError: If it names none.
    """
    if to not in TARGETS:
        raise ConfigError(f"--to {to!r}: send to one of {', '.join(TARGETS)}.")
    return to


def service(to: str) -> str:
    """The target's name for people: ``Kinesis`` or ``Kafka``."""
    return _SERVICE[check_target(to)]


def destination(settings: Settings, to: str) -> str:
    """What the run sends to: the stream's name, or the topic's (what its summary records as ``stream``)."""
    return settings.stream_name if check_target(to) == KINESIS else settings.kafka_topic


def open_sender(settings: Settings, to: str = KINESIS, client: Any | None = None) -> SendLoop:
    """The sender of target ``to`` for these settings.

    Args:
        settings: Name the stream and endpoint, or the topic and cluster.
        to: ``kinesis`` or ``kafka``.
        client: A Kinesis client, or a confluent-kafka Producer (default: one made from the settings).

    Raises:
        ConfigError: If ``to`` names no target, or (Kafka) no broker is configured or running.
    """
    if check_target(to) == KINESIS:
        from icestream.producer.put import Producer, producer_client

        return Producer(client or producer_client(settings), settings.stream_name)
    from icestream.kafka.connection import kafka_connection
    from icestream.producer.kafka_send import KafkaSender

    return KafkaSender(kafka_connection(settings), client)
