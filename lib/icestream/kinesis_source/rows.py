"""A batch's records as the source's rows: one per user record, KPL aggregates and gzip/zlib expanded.

The columns are those the platforms' Kinesis sources give (awslabs' connector, Databricks'):
``data`` (binary), ``streamName``, ``shardId``, ``partitionKey``, ``sequenceNumber``,
``subSequenceNumber`` (the user record's index in a KPL aggregate, 0 for a record that is none)
and ``approximateArrivalTimestamp``. ``data`` is the user record's payload, decompressed when it
came gzip- or zlib-compressed; a record that cannot be decoded (a corrupt aggregate or
compression) keeps its bytes as received, so ``from_json`` shows it as a null and nothing is lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from icestream.ingest.expand import SPECIAL_FIRST_BYTES, expand_record, needs_decoding
from icestream.kinesis_source.fetch import Record

COLUMNS = (
    "data",
    "streamName",
    "shardId",
    "partitionKey",
    "sequenceNumber",
    "subSequenceNumber",
    "approximateArrivalTimestamp",
)
SCHEMA_DDL = (
    "data BINARY, streamName STRING, shardId STRING, partitionKey STRING, sequenceNumber STRING, "
    "subSequenceNumber BIGINT, approximateArrivalTimestamp TIMESTAMP"
)
CHUNK_ROWS = 10_000  # rows per Arrow record batch handed to Spark


def arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("data", pa.binary()),
            ("streamName", pa.string()),
            ("shardId", pa.string()),
            ("partitionKey", pa.string()),
            ("sequenceNumber", pa.string()),
            ("subSequenceNumber", pa.int64()),
            ("approximateArrivalTimestamp", pa.timestamp("us", tz="UTC")),
        ]
    )


UserRecord = tuple[bytes, str, str, int, float | None]  # data, partition key, sequence, sub-sequence, arrival


def user_records(records: Iterable[Record], max_event_bytes: int) -> Iterator[UserRecord]:
    """(data, partition key, sequence number, sub-sequence number, arrival) per user record."""
    for sequence, arrival, partition_key, data in records:
        if not data or data[0] not in SPECIAL_FIRST_BYTES or not needs_decoding(data):
            yield data, partition_key, sequence, 0, arrival
            continue
        for part in expand_record(data, partition_key, max_event_bytes):
            payload = part.payload if part.payload is not None else part.raw
            yield payload, part.partition_key or partition_key, sequence, part.sub or 0, arrival


def record_batches(
    stream_name: str, shard_id: str, records: Iterable[Record], max_event_bytes: int, chunk_rows: int = CHUNK_ROWS
) -> Iterator[Any]:
    """The shard's rows as Arrow record batches of at most ``chunk_rows`` rows."""
    import pyarrow as pa

    schema = arrow_schema()
    chunk: list[UserRecord] = []

    def batch() -> Any:
        data, keys, sequences, subs, arrivals = zip(*chunk, strict=True)
        count = len(chunk)
        micros = [None if moment is None else round(moment * 1_000_000) for moment in arrivals]
        return pa.RecordBatch.from_arrays(
            [
                pa.array(data, pa.binary()),
                pa.repeat(pa.scalar(stream_name, pa.string()), count),
                pa.repeat(pa.scalar(shard_id, pa.string()), count),
                pa.array(keys, pa.string()),
                pa.array(sequences, pa.string()),
                pa.array(subs, pa.int64()),
                pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            ],
            schema=schema,
        )

    for row in user_records(records, max_event_bytes):
        chunk.append(row)
        if len(chunk) >= chunk_rows:
            yield batch()
            chunk = []
    if chunk:
        yield batch()
