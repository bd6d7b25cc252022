"""Send records to a Kafka topic with confluent-kafka's Producer: keyed by the partition key, every delivery counted.

- The message key is the record's partition key (the user id) and the value its data bytes, so each
  user's records land in one partition (Kafka's default partitioner hashes the key), in order.
- ``acks=all`` and ``enable.idempotence=true``: a record counts as sent once every in-sync replica has
  it, and librdkafka's own retries never write it twice or out of order.
- librdkafka batches by itself (``linger.ms``) and retries within ``message.timeout.ms``; the delivery
  report of each record says sent or failed, and is counted in the same
  :class:`~icestream.producer.summary.ProduceSummary` as the Kinesis producer fills (``calls``,
  ``retried`` and ``throttled`` stay 0: librdkafka does not report them per record).
- A record the client refuses at once (larger than ``message.max.bytes``) is *unsendable*, as a record
  above Kinesis's 1 MiB limit is.
- Pacing, the rate limit, the duration and a stop are the loop's (:class:`~icestream.producer.send_loop.SendLoop`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from icestream.errors import ServiceUnavailableError
from icestream.kafka.connection import KafkaConnection
from icestream.kafka.topics import partitions
from icestream.producer.send_loop import SendLoop
from icestream.producer.summary import FailedRecord, ProduceSummary
from icestream.synthetic.wire import Record

# Waits at most this long to fill a batch: librdkafka's default (5 ms) makes small requests at a live
# rate of tens of records per second; 20 ms is still far below a trigger interval of the ingest.
LINGER_MS = 20
# A record not acknowledged within this time is reported failed (librdkafka's default is 5 minutes, a
# long silence for a stopped broker). The close waits this long plus a margin for the last reports.
DELIVERY_TIMEOUT_SECONDS = 60.0
CLOSE_MARGIN_SECONDS = 15.0
QUEUE_FULL_WAIT_SECONDS = 0.1  # a full local queue: serve delivery reports this long, then try again
# Delivery errors that mean the cluster was never reached, rather than a record refused.
_UNREACHABLE = ("_MSG_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_TIMED_OUT")
# Errors produce() raises at once for one record that no retry can send.
_REFUSED = ("MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "_INVALID_ARG")


def producer_config(connection: KafkaConnection) -> dict[str, Any]:
    """confluent-kafka's configuration of the sender: the connection's, with acks, idempotence, linger, timeout."""
    return connection.client_config(
        **{
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": LINGER_MS,
            "message.timeout.ms": int(DELIVERY_TIMEOUT_SECONDS * 1000),
        }
    )


class KafkaSender(SendLoop):
    """A sender to one Kafka topic (see the module docstring).

    Args:
        connection: The cluster and topic (:func:`icestream.kafka.connection.kafka_connection`).
        client: A confluent-kafka Producer, or anything with ``produce``, ``poll`` and ``flush``
            (default: one made with :func:`producer_config`).
        sleep: Waits that many seconds, or less when a stop is requested (for tests: a fake clock).
    """

    def __init__(
        self, connection: KafkaConnection, client: Any | None = None, sleep: Callable[[float], None] | None = None
    ) -> None:
        super().__init__(connection.topic, sleep)
        self.connection = connection
        self.client = client

    def _check(self) -> None:
        """Before anything is sent: a missing topic is a ConfigError, a silent cluster a ServiceUnavailableError."""
        partitions(self.connection)

    def _outlet(self, summary: ProduceSummary, bar: Any) -> _Deliveries:
        if self.client is None:
            from confluent_kafka import Producer

            self.client = Producer(producer_config(self.connection))
        return _Deliveries(self.client, self.connection, summary, bar)


class _Deliveries:
    """One send's outlet: each record handed to librdkafka, each delivery report counted as it is served.

    Reports are served by ``poll`` on the sending thread (after each record, while the loop waits, and
    at the close), so only that thread writes the summary.
    """

    def __init__(self, client: Any, connection: KafkaConnection, summary: ProduceSummary, bar: Any) -> None:
        self._client, self._connection, self._summary, self._bar = client, connection, summary, bar
        self._in_flight = 0
        self._error: ServiceUnavailableError | None = None

    def _report(self, record: Record) -> Callable[[Any, Any], None]:
        def delivered(error: Any, _message: Any) -> None:
            self._in_flight -= 1
            summary = self._summary
            if error is None:
                summary.sent += 1
                summary.bytes_sent += record.size
                summary.sent_by_kind[record.kind] = summary.sent_by_kind.get(record.kind, 0) + 1
            else:
                summary.failed += 1
                summary.failures.append(
                    FailedRecord(
                        record.kind, record.partition_key, record.event_id, record.size, error.name(), error.str()
                    )
                )
            self._bar.update(1)

        return delivered

    def add(self, record: Record, size: int) -> tuple[str, str] | None:
        """Hand the record to librdkafka (waiting while its queue is full), or say why it refused it."""
        from confluent_kafka import KafkaException

        while True:
            try:
                self._client.produce(
                    self._connection.topic,
                    value=record.data,
                    key=record.partition_key.encode(),
                    on_delivery=self._report(record),
                )
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                self._client.poll(QUEUE_FULL_WAIT_SECONDS)
            except KafkaException as error:
                code = error.args[0]
                if code.name() in _REFUSED:
                    return code.name(), code.str()
                raise ServiceUnavailableError(
                    f"Kafka refused a record for topic {self._connection.topic} on {self._connection.bootstrap}: "
                    f"{code.name()}: {code.str()}."
                ) from None
        self._in_flight += 1
        self._client.poll(0)
        return None

    def flush(self) -> None:
        """Serve the delivery reports that have come (librdkafka sends on its own threads, after ``linger.ms``)."""
        self._client.poll(0)

    def close(self) -> None:
        """Wait for every delivery report; a cluster that never answered is a ServiceUnavailableError."""
        left = self._client.flush(DELIVERY_TIMEOUT_SECONDS + CLOSE_MARGIN_SECONDS)
        summary, where = self._summary, f"{self._connection.topic} on {self._connection.bootstrap}"
        if left or self._in_flight:
            summary.failed += self._in_flight  # unreported, so not sent: counted, never lost silently
            self._error = ServiceUnavailableError(
                f"Kafka gave no delivery report for {self._in_flight} records to {where}; "
                f"{summary.sent} were acknowledged. Check `icestream kafka status`, or ICESTREAM_KAFKA_BOOTSTRAP."
            )
            self._in_flight = 0
        elif summary.failed and not summary.sent and summary.failures[-1].error_code in _UNREACHABLE:
            last = summary.failures[-1]
            self._error = ServiceUnavailableError(
                f"Kafka at {self._connection.bootstrap} took none of {summary.failed} records for topic "
                f"{self._connection.topic} ({last.error_code}: {last.error_message}). "
                "Check `icestream kafka status`, or ICESTREAM_KAFKA_BOOTSTRAP."
            )

    def raise_error(self) -> None:
        """Raise the error the close found, if it found one."""
        if self._error is not None:
            raise self._error
