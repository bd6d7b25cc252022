"""The producer: batching within the Kinesis limits, per-record retries, reporting, pacing and stopping."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from hypothesis import given, settings
from hypothesis import strategies as st

from icestream.errors import ConfigError, ServiceUnavailableError
from icestream.limits import MAX_BYTES_PER_PUT, MAX_RECORD_BYTES, MAX_RECORDS_PER_PUT
from icestream.producer.put import Producer, RetryPolicy, batches, record_size
from icestream.producer.summary import ProduceSummary
from icestream.synthetic.malformed import malformed_payload
from icestream.synthetic.wire import Record


def make_record(number: int, size: int = 100, key: str | None = None, send_at: float = 0.0) -> Record:
    key = key or f"u-{number % 7:05d}"
    payload = json.dumps({"n": number, "pad": ""}).encode()
    payload = payload[:-2] + b"x" * max(0, size - len(payload)) + b'"}' if size > len(payload) else payload
    return Record(payload, key, "event", 0.0, send_at, "click", f"id-{number}")


class FlakyKinesis:
    """A Kinesis stand-in whose PutRecords fails chosen records a number of times, as throttling does.

    Args:
        failures: Event id → how many calls fail that record before it succeeds.
        error_code: The per-record error code.
    """

    def __init__(
        self, failures: dict[str, int] | None = None, error_code: str = "ProvisionedThroughputExceededException"
    ):
        self.failures = Counter(failures or {})
        self.error_code = error_code
        self.calls: list[list[bytes]] = []
        self.accepted: list[bytes] = []

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 - boto3 names
        assert 1 <= len(Records) <= MAX_RECORDS_PER_PUT
        assert sum(len(entry["Data"]) + len(entry["PartitionKey"]) for entry in Records) <= MAX_BYTES_PER_PUT
        self.calls.append([entry["Data"] for entry in Records])
        results = []
        for entry in Records:
            event_id = f"id-{json.loads(entry['Data'])['n']}"
            if self.failures[event_id] > 0:
                self.failures[event_id] -= 1
                results.append({"ErrorCode": self.error_code, "ErrorMessage": "Rate exceeded for shard"})
            else:
                self.accepted.append(entry["Data"])
                results.append({"SequenceNumber": str(len(self.accepted)), "ShardId": "shardId-000000000000"})
        failed = sum("ErrorCode" in result for result in results)
        return {"FailedRecordCount": failed, "Records": results}


class RaisingKinesis:
    """PutRecords that always raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    def put_records(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        raise self.error


@given(sizes=st.lists(st.integers(min_value=1, max_value=MAX_RECORD_BYTES + 10), max_size=40))
@settings(max_examples=60, deadline=None)
def test_batches_stay_within_the_limits_and_lose_nothing(sizes: list[int]) -> None:
    records = [Record(b"x" * (size - 1), "k", "event", 0.0, 0.0, event_id=str(i)) for i, size in enumerate(sizes)]
    grouped = list(batches(records, max_records=7))
    sent = [record for group in grouped if isinstance(group, list) for record in group]
    unsendable = [group for group in grouped if isinstance(group, Record)]
    assert sorted(r.event_id for r in sent + unsendable) == sorted(r.event_id for r in records)
    assert [r.event_id for r in sent] == [r.event_id for r in records if record_size(r) <= MAX_RECORD_BYTES]
    assert all(record_size(record) > MAX_RECORD_BYTES for record in unsendable)
    for group in grouped:
        if isinstance(group, list):
            assert 1 <= len(group) <= 7
            assert sum(record_size(record) for record in group) <= MAX_BYTES_PER_PUT


def test_batches_fill_to_500_records() -> None:
    grouped = list(batches(make_record(n) for n in range(1234)))
    assert [len(group) for group in grouped] == [500, 500, 234]


def test_only_failed_records_are_retried_until_they_succeed() -> None:
    client = FlakyKinesis({"id-3": 2, "id-10": 1})
    sleeps: list[float] = []
    producer = Producer(client, "s", retry=RetryPolicy(max_attempts=4), seed=1, sleep=sleeps.append)
    summary = producer.send([make_record(n) for n in range(20)], progress=False)
    assert summary.sent == 20
    assert summary.failed == 0
    assert summary.retried == 3
    assert [len(call) for call in client.calls] == [20, 2, 1]
    assert sorted(client.accepted) == sorted(make_record(n).data for n in range(20))
    assert len(sleeps) == 2
    assert sleeps[1] > sleeps[0] / 2


def test_records_that_keep_failing_are_reported_not_dropped() -> None:
    client = FlakyKinesis({"id-5": 99}, error_code="InternalFailure")
    sleeps: list[float] = []
    producer = Producer(client, "s", retry=RetryPolicy(max_attempts=3, base_delay=0.5), seed=1, sleep=sleeps.append)
    summary = producer.send([make_record(n) for n in range(10)], progress=False)
    assert (summary.sent, summary.failed, summary.retried) == (9, 1, 2)
    assert summary.records == summary.sent + summary.failed + summary.unsendable
    [failure] = summary.failures
    assert failure.event_id == "id-5"
    assert failure.error_code == "InternalFailure"
    assert len(client.calls) == 3
    assert all(0.0 < delay <= 5.0 for delay in sleeps)


def test_backoff_grows_exponentially_with_jitter_and_a_cap() -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=1.0)
    rng = random.Random(0)
    for attempt, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (9, 1.0)]:
        delays = [policy.delay(attempt, rng) for _ in range(50)]
        assert all(ceiling / 2 <= delay <= ceiling for delay in delays)
        assert len(set(delays)) > 1


def test_a_record_above_one_mib_is_reported_and_never_sent() -> None:
    big = Record(malformed_payload("kinesis_oversized"), "u-1", "kinesis_oversized", 0.0, 0.0, "page_view", "big")
    client = FlakyKinesis()
    summary = Producer(client, "s").send([make_record(1), big, make_record(2)], progress=False)
    assert (summary.records, summary.sent, summary.unsendable) == (3, 2, 1)
    assert summary.failures[0].error_code == "RecordTooLarge"
    assert summary.failures[0].event_id == "big"
    assert all(len(data) < MAX_RECORD_BYTES for call in client.calls for data in call)


def test_large_records_are_split_by_bytes() -> None:
    client = FlakyKinesis()
    records = [make_record(n, size=900_000) for n in range(12)]
    summary = Producer(client, "s").send(records, progress=False)
    assert summary.sent == 12
    assert all(len(call) <= 5 for call in client.calls)  # 6 x 900 kB would exceed 5 MiB


def test_partition_key_is_the_records_own() -> None:
    seen: list[str] = []

    class Recording(FlakyKinesis):
        def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
            seen.extend(entry["PartitionKey"] for entry in Records)
            return super().put_records(StreamName=StreamName, Records=Records)

    records = [make_record(n, key=f"user-{n % 3}") for n in range(9)]
    Producer(Recording(), "s").send(records, progress=False)
    assert seen == [record.partition_key for record in records]


def test_a_missing_stream_fails_at_once_with_what_to_do() -> None:
    error = ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "Stream s not found"}}, "PutRecords")
    client = RaisingKinesis(error)
    with pytest.raises(ServiceUnavailableError, match="icestream setup"):
        Producer(client, "s", sleep=lambda _: None).send([make_record(1)], progress=False)
    assert client.calls == 1


def test_throttled_calls_wait_their_turn_past_max_attempts_then_are_reported() -> None:
    error = ClientError(
        {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "PutRecords"
    )
    client = RaisingKinesis(error)
    sleeps: list[float] = []
    policy = RetryPolicy(max_attempts=3, throttle_patience=2.0)
    summary = Producer(client, "s", retry=policy, sleep=sleeps.append).send(
        [make_record(n) for n in range(4)], progress=False
    )
    assert (summary.sent, summary.failed) == (0, 4)
    assert client.calls > 3, "throttles do not use up max_attempts"
    assert sum(sleeps[:-1]) < policy.throttle_patience <= sum(sleeps), "they wait until the patience is spent"
    assert summary.throttled == 4 * client.calls


def test_records_throttled_more_often_than_max_attempts_are_all_delivered() -> None:
    client = FlakyKinesis({"id-2": 10, "id-7": 4})  # throttled (the default code) ten and four times
    producer = Producer(client, "s", retry=RetryPolicy(max_attempts=3), seed=1, sleep=lambda _: None)
    summary = producer.send([make_record(n) for n in range(10)], progress=False)
    assert (summary.sent, summary.failed, summary.throttled) == (10, 0, 14)
    assert sorted(client.accepted) == sorted(make_record(n).data for n in range(10))


def test_an_unreachable_endpoint_raises_after_the_retries() -> None:
    client = RaisingKinesis(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    producer = Producer(client, "s", retry=RetryPolicy(max_attempts=2), sleep=lambda _: None)
    with pytest.raises(ServiceUnavailableError, match="could not be reached"):
        producer.send([make_record(1)], progress=False)
    assert client.calls == 2


def test_rate_limit_waits_between_batches() -> None:
    sleeps: list[float] = []
    client = FlakyKinesis()
    summary = Producer(client, "s", sleep=sleeps.append).send(
        [make_record(n) for n in range(30)], rate_limit=10.0, progress=False
    )
    assert summary.sent == 30
    assert sleeps
    assert all(delay > 0 for delay in sleeps)
    assert len(client.calls) > 1


def test_pacing_stops_at_the_duration_without_taking_future_records() -> None:
    import time

    now = time.time()
    records = [make_record(n, send_at=now + n * 3600.0) for n in range(3)]  # one now, the rest in hours
    client = FlakyKinesis()
    summary = Producer(client, "s").send(records, pace=True, duration=0.3, progress=False)
    assert summary.stopped_early
    assert (summary.records, summary.sent, summary.unsent) == (2, 1, 1)  # the one in hand is counted, not sent


def test_stop_ends_a_run_early() -> None:
    client = FlakyKinesis()
    producer = Producer(client, "s")

    def records() -> Any:
        for number in range(100):
            if number == 10:
                producer.stop()
            yield make_record(number)

    summary = producer.send(records(), progress=False)
    assert summary.stopped_early
    assert (summary.sent, summary.unsent, summary.records) == (10, 1, 11)


@pytest.mark.parametrize(("options", "message"), [({"rate_limit": 0}, "rate limit"), ({"duration": -1}, "duration")])
def test_bad_send_options_are_refused(options: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Producer(FlakyKinesis(), "s").send([], **options)


def test_summary_is_json_ready() -> None:
    client = FlakyKinesis({"id-1": 99})
    summary = Producer(client, "s", retry=RetryPolicy(max_attempts=2), sleep=lambda _: None).send(
        [make_record(n) for n in range(3)], progress=False
    )
    values = json.loads(json.dumps(summary.as_dict()))
    assert values["sent"] == 2
    assert values["failed"] == 1
    assert values["sent_by_kind"] == {"event": 2}
    assert values["failures"][0]["event_id"] == "id-1"
    assert summary.table()["sent"] == 2
    again = ProduceSummary.from_dict(values)
    assert (again.sent, again.failed, again.sent_by_kind) == (2, 1, {"event": 2})
    assert again.failures == summary.failures


def test_calls_stay_in_input_order_while_the_next_batch_is_built() -> None:
    import time

    class Slow(FlakyKinesis):
        def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
            time.sleep(0.01)  # a call in flight while the producer takes the next records
            return super().put_records(StreamName=StreamName, Records=Records)

    client = Slow({"id-700": 1})
    records = [make_record(n) for n in range(2_345)]
    summary = Producer(client, "s", sleep=lambda _: None).send(records, progress=False)
    assert [len(call) for call in client.calls] == [500, 500, 1, 500, 500, 345]
    order = [*range(700), *range(701, 1000), 700, *range(1000, 2_345)]
    assert client.accepted == [records[n].data for n in order], "a retried record follows its batch, not later ones"
    assert summary.records == summary.sent == 2_345
    assert summary.line().startswith("2345 records: sent 2345, failed 0, unsendable 0 (retried 1, throttled 1)")


def test_a_partition_key_kinesis_would_refuse_is_reported_and_never_sent() -> None:
    client = FlakyKinesis()
    records = [make_record(1), make_record(2, key="k" * 257), Record(b"{}", "", "file", 0.0, 0.0)]
    summary = Producer(client, "s").send(records, progress=False)
    assert (summary.records, summary.sent, summary.unsendable) == (3, 1, 2)
    assert [failure.error_code for failure in summary.failures] == ["InvalidPartitionKey", "InvalidPartitionKey"]
    assert client.accepted == [records[0].data]
