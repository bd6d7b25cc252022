"""From one Kinesis record to the user records it carries, before any payload is parsed.

A record is one of:

- a plain payload (the common case: a JSON event), passed through untouched;
- a gzip or zlib payload (CloudWatch Logs subscriptions send gzip), decompressed to at most
  ``max_event_bytes`` (a decompression bomb is refused as ``oversized``);
- a KPL aggregate (:mod:`icestream.kinesis.kpl`): it expands to its user records, each with its
  sub-sequence number (its index in the aggregate) and its own partition key; each user record may
  itself be compressed.

What cannot be decoded becomes a reject here, with its own reason: ``corrupt_aggregate`` (bad
checksum, truncated or malformed protobuf, a key index out of range: the whole Kinesis record is
one reject, since no user record of it can be trusted) and ``corrupt_compressed``.
"""

from __future__ import annotations

from dataclasses import dataclass

from icestream.ingest.parse import Rejection
from icestream.kinesis.compression import CorruptCompressionError, DecompressedTooLargeError, compression_of, decompress
from icestream.kinesis.kpl import AggregateError, decode_aggregate, is_aggregate

RECORD_REJECT_REASONS = ("corrupt_aggregate", "corrupt_compressed")
# First bytes that need decoding: KPL magic, gzip, zlib. Anything else is parsed as it is.
SPECIAL_FIRST_BYTES = frozenset((0xF3, 0x1F, 0x78))


@dataclass(frozen=True, slots=True)
class UserPayload:
    """One user record of a Kinesis record.

    Attributes:
        sub: Its sub-sequence number in a KPL aggregate; None for a record that is not an aggregate.
        partition_key: Its partition key (an aggregate's user records carry their own).
        raw: Its bytes as received (a reject stores these).
        payload: The bytes to parse (decompressed), or None when ``rejection`` says why not.
        rejection: Why it cannot be parsed, or None.
    """

    sub: int | None
    partition_key: str | None
    raw: bytes
    payload: bytes | None
    rejection: Rejection | None = None


def needs_decoding(data: bytes) -> bool:
    """True for an aggregate or a compressed payload (cheap: one byte is looked at first)."""
    return bool(data) and data[0] in SPECIAL_FIRST_BYTES and (is_aggregate(data) or compression_of(data) is not None)


def decode_payload(data: bytes, max_event_bytes: int) -> bytes | Rejection:
    """``data`` decompressed if it is gzip or zlib, else as it is; or why it cannot be."""
    if compression_of(data) is None:
        return data
    try:
        return decompress(data, max_event_bytes)
    except DecompressedTooLargeError as error:
        return Rejection("oversized", str(error))
    except CorruptCompressionError as error:
        return Rejection("corrupt_compressed", str(error)[:200])


def _user_payload(sub: int | None, partition_key: str | None, raw: bytes, max_event_bytes: int) -> UserPayload:
    decoded = decode_payload(raw, max_event_bytes)
    if isinstance(decoded, Rejection):
        if sub is not None:
            decoded = Rejection(decoded.reason, f"user record {sub} of a KPL aggregate: {decoded.detail}")
        return UserPayload(sub, partition_key, raw, None, decoded)
    return UserPayload(sub, partition_key, raw, decoded)


def expand_record(data: bytes, partition_key: str | None, max_event_bytes: int) -> list[UserPayload]:
    """The user records of one Kinesis record, in sub-sequence order.

    Args:
        data: The record's data.
        partition_key: The record's partition key.
        max_event_bytes: The cap on one decompressed payload.

    Returns:
        One entry per user record; a corrupt aggregate gives one entry (``sub`` None) with a
        ``corrupt_aggregate`` rejection and the whole record as ``raw``.
    """
    if not needs_decoding(data):
        return [UserPayload(None, partition_key, data, data)]
    if not is_aggregate(data):
        return [_user_payload(None, partition_key, data, max_event_bytes)]
    try:
        records = decode_aggregate(data)
    except AggregateError as error:
        return [UserPayload(None, partition_key, data, None, Rejection("corrupt_aggregate", str(error)[:200]))]
    if not records:
        return [UserPayload(None, partition_key, data, None, Rejection("corrupt_aggregate", "no user records"))]
    return [
        _user_payload(sub, record.partition_key, record.data, max_event_bytes) for sub, record in enumerate(records)
    ]
