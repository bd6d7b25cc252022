"""The KPL aggregate codec: round trips, the wire details it must get right, and every corruption."""

from __future__ import annotations

import contextlib
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icestream.kinesis.kpl import (
    CHECKSUM_BYTES,
    MAGIC,
    AggregateBuilder,
    AggregateError,
    UserRecord,
    decode_aggregate,
    decode_varint,
    encode_aggregate,
    encode_varint,
    is_aggregate,
)


def wrap(body: bytes) -> bytes:
    """Magic + body + a correct checksum: corruptions below then test the protobuf, not the MD5."""
    return MAGIC + body + hashlib.md5(body).digest()  # noqa: S324 - the format's checksum


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
     (2**64 - 1, b"\xff" * 9 + b"\x01")],
)  # fmt: skip
def test_varints_match_the_protobuf_encoding(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded + b"rest", 0) == (value, len(encoded))


def test_a_hand_written_aggregate_decodes() -> None:
    # partition_key_table ["a", "bb"], explicit_hash_key_table ["7"], then two records.
    record_one = b"\x08\x01" + b"\x10\x00" + b"\x1a\x02hi"  # key 1 ("bb"), hash key 0, data "hi"
    record_two = b"\x08\x00" + b"\x1a\x00" + b"\x22\x03\x0a\x01k"  # key 0, empty data, a tag (skipped)
    body = b"\x0a\x01a" + b"\x0a\x02bb" + b"\x12\x017" + b"\x1a" + bytes([len(record_one)]) + record_one
    body += b"\x1a" + bytes([len(record_two)]) + record_two
    assert decode_aggregate(wrap(body)) == [UserRecord("bb", b"hi", "7"), UserRecord("a", b"", None)]


def test_round_trip_shares_partition_keys_and_keeps_order() -> None:
    records = [("u1", b'{"a":1}'), ("u2", b"x" * 300), ("u1", b""), ("ü-ß", b"\x00\xff")]
    data = encode_aggregate(records)
    assert is_aggregate(data)
    assert [(record.partition_key, record.data) for record in decode_aggregate(data)] == records
    assert data.count(b"u1") == 1  # the key table holds each key once


@given(st.lists(st.tuples(st.text(min_size=1, max_size=20), st.binary(max_size=300)), min_size=1, max_size=30))
def test_round_trip_property(records: list[tuple[str, bytes]]) -> None:
    builder = AggregateBuilder()
    for key, data in records:
        expected = builder.size_with(key, data)
        builder.add(key, data)
        assert len(builder.build()) == expected  # the size the producer plans with is exact
    decoded = decode_aggregate(builder.build())
    assert [(record.partition_key, record.data) for record in decoded] == records


@given(st.binary(max_size=200))
def test_arbitrary_bytes_after_the_magic_decode_or_raise_aggregate_error(body: bytes) -> None:
    with contextlib.suppress(AggregateError):
        assert all(isinstance(record, UserRecord) for record in decode_aggregate(wrap(body)))


GOOD = encode_aggregate([("k", b"one"), ("k", b"two")])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (GOOD[:-1] + bytes([GOOD[-1] ^ 1]), "MD5"),  # checksum flipped
        (GOOD[:10] + bytes([GOOD[10] ^ 0x40]) + GOOD[11:], "MD5"),  # payload flipped
        (MAGIC + b"\x00" * (CHECKSUM_BYTES - 1), "too short"),
        (wrap(b"\x0a\x05ab"), "announced"),  # a key of 5 bytes with 2 left
        (wrap(b"\x0a"), "truncated varint"),
        (wrap(b"\x0a\x01k\x1a\x04\x08\x03\x1a\x00"), "out of range"),  # record points at key 3 of 1
        (wrap(b"\x0a\x01k\x1a\x02\x08\x00"), "data is missing"),
        (wrap(b"\x0a\x01k\x1a\x06\x08\x00\x10\x02\x1a\x00"), "out of range"),  # hash key index, no table
        (wrap(b"\x0a\x01k\x1a\x03\x1a\x01x"), "partition_key_index is missing"),
        (wrap(b"\x0a\x02\xff\xfe"), "not UTF-8"),
        (wrap(b"\x0b"), "wire type 3"),
        (wrap(b"\x08\x01"), "expected length-delimited"),
        (wrap(b"\x0a" + b"\xff" * 11), "longer than"),
    ],
)
def test_corrupt_aggregates_raise_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(AggregateError, match=message):
        decode_aggregate(data)


def test_unknown_fields_are_skipped() -> None:
    body = b"\x0a\x01k" + b"\x21" + b"\x00" * 8 + b"\x2d" + b"\x00" * 4 + b"\x30\x05" + b"\x1a\x05\x08\x00\x1a\x01z"
    assert decode_aggregate(wrap(body)) == [UserRecord("k", b"z")]


def test_varint_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="uint64"):
        encode_varint(-1)


@pytest.mark.parametrize("size", [0, 1, 127, 128, 16383, 16384, 70000])
def test_payload_lengths_of_one_two_and_three_varint_bytes_decode(size: int) -> None:
    # fields() reads one- and two-byte varints itself and leaves longer ones to decode_varint.
    data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    decoded = decode_aggregate(encode_aggregate([("k", data), ("k", b"x")]))
    assert decoded == [UserRecord("k", data), UserRecord("k", b"x")]


@pytest.mark.parametrize(
    ("body", "message"),
    [(b"\x0a", "truncated varint at byte 1"), (b"\x0a\x80", "truncated varint at byte 1"),
     (b"\x0a\x80\x80", "truncated varint at byte 1"), (b"\x1a\xff\x01\x00", "field 3: 255 bytes announced, 1 left"),
     (b"\x08\x80", "truncated varint at byte 1")],
)  # fmt: skip
def test_a_varint_cut_short_is_refused_at_its_first_byte(body: bytes, message: str) -> None:
    with pytest.raises(AggregateError, match=message):
        decode_aggregate(wrap(body))
