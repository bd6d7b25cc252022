"""The emulator started as users start it throttles like Kinesis, and the producer still delivers every record.

The test session's shared emulator runs without the write limits (tests/conftest.py); these tests
start their own, with the limits on as ``icestream emulator start`` does by default.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from icestream.config import Settings, load_settings
from icestream.kinesis.clients import ensure_stream, kinesis_client
from icestream.kinesis.emulator import Emulator
from icestream.limits import THROTTLED
from icestream.producer.put import produce
from tests.helpers.streams import read_stream, user_records


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Settings]:
    server = Emulator(tmp_path / "run")
    endpoint = server.start()  # the default: the limits on
    try:
        yield load_settings(kinesis_endpoint=endpoint, stream_name=f"limits-{uuid.uuid4().hex[:8]}")
    finally:
        server.stop()


def test_one_call_above_a_shards_mebibyte_is_partly_throttled(limited: Settings) -> None:
    ensure_stream(limited, shard_count=1)
    client = kinesis_client(limited)
    # 500 records of 4,000 bytes: 1.9 MiB in one call, to a shard that takes 1 MiB per second.
    records = [{"Data": b"x" * 4000, "PartitionKey": f"k{n}"} for n in range(500)]
    answer = client.put_records(StreamName=limited.stream_name, Records=records)
    refused = [entry for entry in answer["Records"] if "ErrorCode" in entry]
    assert answer["FailedRecordCount"] == len(refused) > 0
    assert {entry["ErrorCode"] for entry in refused} == {THROTTLED}
    assert len(read_stream(limited)) == 500 - len(refused), "what was refused was not stored"


def test_the_producer_delivers_every_record_through_the_limits(limited: Settings) -> None:
    ensure_stream(limited, shard_count=2)
    summary = produce(limited, user_records(0, 5000), progress=False)
    assert (summary.sent, summary.failed, summary.records) == (5000, 0, 5000)
    assert summary.retried >= summary.throttled
    found = read_stream(limited)
    assert len(found) == 5000, "counted back by a plain boto3 reader"
    sent = sorted((record["PartitionKey"], json.loads(record["Data"])["event_id"]) for record in found)
    assert sent == sorted((f"u{n % 5}", f"ev-{n}") for n in range(5000)), "each record once"


def test_notebook_01s_hot_shard_is_throttled_and_delivered_on_a_stream_of_its_own(limited: Settings) -> None:
    from icestream.demos.hot_shard import hot_shard_demo

    summary = hot_shard_demo(limited)  # 1,000 records of 4,000 bytes: twice a shard's MiB in the first call alone
    assert (summary.sent, summary.failed) == (1000, 0)
    assert summary.throttled > 0
    streams = kinesis_client(limited).list_streams()["StreamNames"]
    assert not [name for name in streams if name.startswith(limited.stream_name)], "the demo stream is deleted"
