"""Test publisher: puts sample events (the workbook's wire shape) into the stream named by STREAM_NAME.

Invoke it with ``{"count": 10}`` for generated events, or ``{"events": [{...}, ...]}`` for your own;
it answers ``{"sent": n, "failed": m}``. Self-contained: CloudFormation embeds this file.
"""

import json
import os
import random
import uuid
from datetime import UTC, datetime

import boto3

EVENT_TYPES = ("page_view", "click", "add_to_cart", "purchase")
MAX_RECORDS = 500  # PutRecords takes at most 500 records a call


def sample_event(rng):
    user = f"u-{rng.randrange(1000):04d}"
    return {
        "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "user_id": user,
        "session_id": f"s-{user}-{rng.randrange(10)}",
        "event_type": rng.choice(EVENT_TYPES),
        "event_ts": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "properties": {"page": rng.choice(("/home", "/cart", "/item"))},
        "device_info": {"device_type": "mobile", "os": "iOS", "app_version": "5.2.1"},
    }


def handler(event, context=None, kinesis=None):
    """Put the events (or ``count`` generated ones) into the stream, keyed by user as the workbook's producer."""
    events = event.get("events")
    if events is None:
        count = int(event.get("count", 10))
        if not 1 <= count <= 10000:
            raise ValueError(f"count {count}: give 1 to 10000")
        rng = random.Random(event.get("seed"))  # noqa: S311 sample data, not secrets
        events = [sample_event(rng) for _ in range(count)]
    kinesis = kinesis or boto3.client("kinesis")
    sent = failed = 0
    for start in range(0, len(events), MAX_RECORDS):
        chunk = events[start : start + MAX_RECORDS]
        answer = kinesis.put_records(
            StreamName=os.environ["STREAM_NAME"],
            Records=[{"Data": json.dumps(item).encode("utf-8"), "PartitionKey": item["user_id"]} for item in chunk],
        )
        failed += answer["FailedRecordCount"]
        sent += len(chunk) - answer["FailedRecordCount"]
    return {"sent": sent, "failed": failed}
