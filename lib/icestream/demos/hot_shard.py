"""A hot shard, on a stream of its own: more data at once than one shard takes in a second.

Kinesis takes at most 1 MiB (and 1,000 records) per second into a shard; every entry beyond that
is answered ``ProvisionedThroughputExceededException`` and must be sent again. Notebook 01 shows
it on a one-shard stream made for the purpose (and deleted after), so the workbook's own stream
and tables are not touched: records of ``record_bytes`` under one partition key, sent as fast as
the producer can, are throttled and retried with backoff, and every one is still delivered.

It runs only against an emulator (the ``local`` and ``localstack`` profiles): on AWS it would
create and delete a stream in your account, which the jobs' least-privilege role may not do.
"""

from __future__ import annotations

import json
from dataclasses import replace

from icestream.config import Settings
from icestream.kinesis.clients import ensure_stream, kinesis_client
from icestream.producer.put import produce
from icestream.producer.summary import ProduceSummary
from icestream.synthetic.wire import Record

DEMO_SUFFIX = "hot-shard-demo"


def hot_shard_demo(settings: Settings, records: int = 1000, record_bytes: int = 4000) -> ProduceSummary | None:
    """Send ``records`` records of ``record_bytes`` bytes, one partition key, to a new one-shard stream.

    Args:
        settings: Names the workbook's stream; the demo's is ``<stream>-hot-shard-demo``.
        records: How many to send (1,000 of 4,000 bytes: about 3.8 MiB, four seconds of one shard).
        record_bytes: Size of each record's data.

    Returns:
        What the producer did (``throttled``, ``retried``, ``sent``, ``seconds``); None, sending
        nothing, when Kinesis is not an emulator.
    """
    if not settings.is_local_endpoint:
        return None
    demo = replace(settings, stream_name=f"{settings.stream_name}-{DEMO_SUFFIX}")
    ensure_stream(demo, shard_count=1)
    padding = "x" * max(0, record_bytes - 40)
    batch = [
        Record(json.dumps({"n": number, "pad": padding}).encode(), "hot", "event", 0.0, 0.0, event_id=str(number))
        for number in range(records)
    ]
    try:
        return produce(demo, batch, progress=False)
    finally:
        kinesis_client(demo).delete_stream(StreamName=demo.stream_name, EnforceConsumerDeletion=True)
