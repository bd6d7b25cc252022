"""An in-memory confluent-kafka Producer: ``produce`` queues a record, ``poll`` and ``flush`` report its delivery."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException


class FakeKafkaProducer:
    """Takes records as librdkafka would and serves their delivery reports on ``poll``/``flush``.

    Args:
        errors: Message key → the delivery error its records get (else they are delivered).
        max_value_bytes: A larger value is refused at ``produce`` (``MSG_SIZE_TOO_LARGE``), as librdkafka does.
        queue_limit: ``produce`` raises BufferError while this many reports wait (the local queue is full).
        silent: Never report a delivery (a cluster that takes the connection and never answers).
    """

    def __init__(
        self,
        errors: dict[bytes, int] | None = None,
        max_value_bytes: int | None = None,
        queue_limit: int | None = None,
        silent: bool = False,
    ) -> None:
        self.errors = errors or {}
        self.max_value_bytes = max_value_bytes
        self.queue_limit = queue_limit
        self.silent = silent
        self.pending: list[tuple[str, bytes, bytes, Callable[[Any, Any], None]]] = []
        self.delivered: list[tuple[str, bytes, bytes]] = []
        self.full = 0  # how often produce found the queue full

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Callable[[Any, Any], None]) -> None:
        if self.max_value_bytes is not None and len(value) > self.max_value_bytes:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message size too large"))
        if self.queue_limit is not None and len(self.pending) >= self.queue_limit:
            self.full += 1
            raise BufferError("Local: Queue full")
        self.pending.append((topic, key, value, on_delivery))

    def poll(self, timeout: float = 0.0) -> int:
        if self.silent:
            return 0
        served, self.pending = self.pending, []
        for topic, key, value, report in served:
            code = self.errors.get(key)
            if code is None:
                self.delivered.append((topic, key, value))
            report(None if code is None else KafkaError(code), (topic, key, value))
        return len(served)

    def flush(self, timeout: float | None = None) -> int:
        self.poll()
        return len(self.pending)
