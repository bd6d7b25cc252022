"""Sending records to Kinesis, or to a Kafka topic.

- :mod:`~icestream.producer.send_loop`: the loop every sender shares (pacing, rate limit, duration,
  stop, the summary's count).
- :mod:`~icestream.producer.put`: the PutRecords sender (batches within the limits, per-record retries,
  a sender thread).
- :mod:`~icestream.producer.kafka_send`: the Kafka sender (confluent-kafka, keyed by the partition key,
  every delivery report counted).
- :mod:`~icestream.producer.target`: which of the two a run uses (``--to kinesis|kafka``).
- :mod:`~icestream.producer.summary`: what a run of the producer did, every record accounted for.
- :mod:`~icestream.producer.plan`: what an ``icestream produce`` run sends, at what rate and why.
- :mod:`~icestream.producer.run`: one production run and its typed summary in the run folder.
- :mod:`~icestream.producer.background`: live production in its own process (start, status, stop).

The scenarios that send to a stream of their own and check an ingest against it (the hot shard, the
crash, the routed, change and metrics streams) are :mod:`icestream.demos`.

The names notebooks use are offered by :mod:`icestream.demos`; the command line and the tests import
from the modules.
"""
