"""A batch's records as the source's rows: plain, KPL aggregates expanded, gzip/zlib decompressed, corrupt kept."""

from __future__ import annotations

import gzip
import zlib
from datetime import UTC, datetime

import pyarrow as pa

from icestream.kinesis.kpl import MAGIC, encode_aggregate
from icestream.kinesis_source.fetch import Record
from icestream.kinesis_source.rows import COLUMNS, SCHEMA_DDL, arrow_schema, record_batches, user_records

MAX_EVENT = 64 * 1024
ARRIVAL = 1_795_000_000.123456


def test_a_plain_record_is_one_row_as_it_came() -> None:
    records: list[Record] = [("1000", ARRIVAL, "k1", b'{"a": 1}'), ("1001", None, "k2", b"xyz, not zlib")]
    assert list(user_records(records, MAX_EVENT)) == [
        (b'{"a": 1}', "k1", "1000", 0, ARRIVAL),
        (b"xyz, not zlib", "k2", "1001", 0, None),
    ]


def test_an_empty_record_is_one_empty_row() -> None:
    assert list(user_records([("1000", None, "k", b"")], MAX_EVENT)) == [(b"", "k", "1000", 0, None)]


def test_a_kpl_aggregate_becomes_its_user_records_with_their_own_keys() -> None:
    aggregate = encode_aggregate([("user-a", b"one"), ("user-b", b"two"), ("user-a", b"three")])
    rows = list(user_records([("2000", ARRIVAL, "outer", aggregate)], MAX_EVENT))
    assert rows == [
        (b"one", "user-a", "2000", 0, ARRIVAL),
        (b"two", "user-b", "2000", 1, ARRIVAL),
        (b"three", "user-a", "2000", 2, ARRIVAL),
    ]


def test_gzip_and_zlib_records_are_decompressed() -> None:
    records: list[Record] = [
        ("1", None, "k", gzip.compress(b'{"gz": true}')),
        ("2", None, "k", zlib.compress(b'{"zlib": true}')),
    ]
    assert [row[0] for row in user_records(records, MAX_EVENT)] == [b'{"gz": true}', b'{"zlib": true}']
    assert [row[3] for row in user_records(records, MAX_EVENT)] == [0, 0]


def test_compressed_user_records_inside_an_aggregate_are_decompressed() -> None:
    aggregate = encode_aggregate([("k", gzip.compress(b"inner-1")), ("k", b"inner-2")])
    rows = list(user_records([("3000", None, "outer", aggregate)], MAX_EVENT))
    assert [(row[0], row[3]) for row in rows] == [(b"inner-1", 0), (b"inner-2", 1)]


def test_a_corrupt_aggregate_is_one_row_with_its_bytes_as_received() -> None:
    corrupt = MAGIC + b"\x0a\x03abc" + b"\x00" * 16  # a bad checksum
    assert list(user_records([("4000", None, "k", corrupt)], MAX_EVENT)) == [(corrupt, "k", "4000", 0, None)]


def test_a_corrupt_compressed_record_keeps_its_bytes() -> None:
    corrupt = gzip.compress(b"some payload")[:-6]  # truncated
    assert list(user_records([("5000", None, "k", corrupt)], MAX_EVENT)) == [(corrupt, "k", "5000", 0, None)]


def test_a_payload_expanding_beyond_the_cap_keeps_its_compressed_bytes() -> None:
    bomb = gzip.compress(b"a" * 5000)
    assert [row[0] for row in user_records([("6000", None, "k", bomb)], 1000)] == [bomb]
    assert [row[0] for row in user_records([("6000", None, "k", bomb)], 10_000)] == [b"a" * 5000]


def test_the_arrow_schema_is_the_declared_schema() -> None:
    schema = arrow_schema()
    assert tuple(schema.names) == COLUMNS
    assert [part.split()[0] for part in SCHEMA_DDL.split(", ")] == list(COLUMNS)
    assert [str(field.type) for field in schema] == [
        "binary",
        "string",
        "string",
        "string",
        "string",
        "int64",
        "timestamp[us, tz=UTC]",
    ]


def test_record_batches_hold_every_row_with_its_stream_shard_and_arrival() -> None:
    aggregate = encode_aggregate([("a", b"x"), ("b", b"y")])
    records: list[Record] = [("7000", ARRIVAL, "p", b"plain"), ("7001", None, "q", aggregate)]
    (batch,) = list(record_batches("events", "shardId-3", records, MAX_EVENT))
    assert batch.schema == arrow_schema()
    assert batch.to_pydict() == {
        "data": [b"plain", b"x", b"y"],
        "streamName": ["events"] * 3,
        "shardId": ["shardId-3"] * 3,
        "partitionKey": ["p", "a", "b"],
        "sequenceNumber": ["7000", "7001", "7001"],
        "subSequenceNumber": [0, 0, 1],
        "approximateArrivalTimestamp": [
            datetime.fromtimestamp(1_795_000_000, UTC).replace(microsecond=123456),
            None,
            None,
        ],
    }


def test_arrival_is_kept_to_the_microsecond() -> None:
    (batch,) = list(record_batches("s", "shardId-0", [("1", 1.000001, "k", b"d")], MAX_EVENT))
    assert batch.column("approximateArrivalTimestamp").cast(pa.int64()).to_pylist() == [1_000_001]


def test_rows_come_in_chunks_of_at_most_chunk_rows_in_order() -> None:
    records: list[Record] = [(str(1000 + number), None, "k", b"%d" % number) for number in range(7)]
    batches = list(record_batches("s", "shardId-0", records, MAX_EVENT, chunk_rows=3))
    assert [batch.num_rows for batch in batches] == [3, 3, 1]
    assert [value for batch in batches for value in batch.column("sequenceNumber").to_pylist()] == [
        record[0] for record in records
    ]


def test_a_chunk_counts_user_records_not_kinesis_records() -> None:
    aggregate = encode_aggregate([("k", b"%d" % number) for number in range(5)])
    batches = list(record_batches("s", "shardId-0", [("1", None, "k", aggregate)], MAX_EVENT, chunk_rows=2))
    assert [batch.num_rows for batch in batches] == [2, 2, 1]


def test_no_records_make_no_batch() -> None:
    assert list(record_batches("s", "shardId-0", [], MAX_EVENT)) == []
