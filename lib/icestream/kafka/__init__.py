"""Kafka: the local broker (one Apache Kafka KRaft node on loopback), started like the Kinesis emulator.

What notebooks and scripts use is offered here (``__all__``), each name looked up on first use.
"""

from __future__ import annotations

from icestream.face import Face

_FACE = Face(
    __name__,
    {
        "Broker": "icestream.kafka.broker",
        "BrokerStatus": "icestream.kafka.broker",
        "ConnectWorker": "icestream.kafka.connect_worker",
        "KafkaConnection": "icestream.kafka.connection",
        "kafka_connection": "icestream.kafka.connection",
        "sink_spec": "icestream.kafka.connect_worker",
    },
)
__all__ = _FACE.names
__getattr__ = _FACE.get
__dir__ = _FACE.dir
