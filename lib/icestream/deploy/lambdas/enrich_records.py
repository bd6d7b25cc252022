"""Firehose transformation: each Kinesis record's event, with the table's ingest metadata columns filled.

Firehose calls ``handler`` with ``{"records": [{"recordId", "data" (base64), "approximateArrivalTimestamp"
(ms), "kinesisRecordMetadata": {"shardId", "partitionKey", "sequenceNumber", ...}}]}`` and expects
every recordId back with ``result`` ``Ok`` (new base64 ``data``), ``Dropped`` or ``ProcessingFailed``
(Firehose writes those under the error output prefix). Self-contained: CloudFormation embeds this file.
"""

import base64
import json
from datetime import UTC, datetime

REQUIRED_FIELDS = ("event_id", "event_type", "event_ts", "user_id")  # lake.schema's, checked by a unit test


def _iso(moment):
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _enriched(record, ingest_ts):
    event = json.loads(base64.b64decode(record["data"]).decode("utf-8"))
    if not isinstance(event, dict):
        raise ValueError("not a JSON object")
    missing = [name for name in REQUIRED_FIELDS if not event.get(name)]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    kinesis = record.get("kinesisRecordMetadata", {})
    arrival_ms = kinesis.get("approximateArrivalTimestamp", record.get("approximateArrivalTimestamp"))
    event.update(
        shard_id=kinesis.get("shardId"),
        sequence_number=kinesis.get("sequenceNumber"),
        partition_key=kinesis.get("partitionKey"),
        arrival_ts=None if arrival_ms is None else _iso(datetime.fromtimestamp(arrival_ms / 1000, UTC)),
        ingest_ts=ingest_ts,
    )
    return event


def handler(event, context=None):
    """Enrich each record; a record that is not an event fails (to the error prefix), a repeat is dropped."""
    ingest_ts = _iso(datetime.now(UTC))
    seen = set()  # event ids in this invocation: a producer's retry inside one buffer is delivered once
    out = []
    for record in event["records"]:
        try:
            enriched = _enriched(record, ingest_ts)
        except (ValueError, UnicodeDecodeError, TypeError) as error:
            print(json.dumps({"recordId": record["recordId"], "failed": str(error)}))
            out.append({"recordId": record["recordId"], "result": "ProcessingFailed", "data": record["data"]})
            continue
        if enriched["event_id"] in seen:
            out.append({"recordId": record["recordId"], "result": "Dropped", "data": record["data"]})
            continue
        seen.add(enriched["event_id"])
        data = base64.b64encode(json.dumps(enriched, separators=(",", ":")).encode("utf-8")).decode("ascii")
        out.append({"recordId": record["recordId"], "result": "Ok", "data": data})
    return {"records": out}
