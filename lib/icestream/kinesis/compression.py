"""Compressed payloads: gzip (CloudWatch Logs subscriptions send it) and zlib, recognised by header.

A JSON event starts with ``{`` (or whitespace), so the two-byte headers cannot be mistaken for an
event: gzip starts ``1F 8B``, zlib ``78`` followed by ``01``, ``5E``, ``9C`` or ``DA`` (the four
compression levels zlib writes). Decompression is capped: a few kilobytes of gzip can expand to
gigabytes (a decompression bomb), so output stops one byte past the cap and the payload is refused.
"""

from __future__ import annotations

import gzip
import zlib

GZIP_MAGIC = b"\x1f\x8b"
ZLIB_HEADERS = frozenset((b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda"))
GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate
CODECS = ("gzip", "zlib")


class CorruptCompressionError(ValueError):
    """The payload has a compression header but does not decompress."""


class DecompressedTooLargeError(ValueError):
    """The payload decompresses to more than the cap allows."""


def compression_of(data: bytes) -> str | None:
    """``gzip``, ``zlib`` or None, from the payload's first two bytes."""
    head = data[:2]
    if head == GZIP_MAGIC:
        return "gzip"
    if head in ZLIB_HEADERS:
        return "zlib"
    return None


def decompress(data: bytes, limit: int) -> bytes:
    """Decompress a gzip (one or more members) or zlib payload to at most ``limit`` bytes.

    Raises:
        CorruptCompressionError: Bad header, bad checksum, truncated stream, or trailing garbage.
        DecompressedTooLargeError: More than ``limit`` bytes would come out.
    """
    codec = compression_of(data)
    if codec is None:
        raise CorruptCompressionError("no gzip or zlib header")
    out = bytearray()
    rest = data
    while True:
        engine = zlib.decompressobj(GZIP_WBITS if codec == "gzip" else zlib.MAX_WBITS)
        try:
            out += engine.decompress(rest, limit + 1 - len(out))
        except zlib.error as error:
            raise CorruptCompressionError(f"{codec}: {error}") from None
        if len(out) > limit:
            raise DecompressedTooLargeError(f"{codec} payload expands beyond {limit} bytes")
        if engine.unconsumed_tail:  # output capped exactly at the limit with input left
            raise DecompressedTooLargeError(f"{codec} payload expands beyond {limit} bytes")
        if not engine.eof:
            raise CorruptCompressionError(f"{codec}: truncated stream ({len(data)} bytes)")
        rest = engine.unused_data
        if not rest:
            return bytes(out)
        # gzip allows several members back to back (``cat a.gz b.gz``); anything else after is corrupt.
        if codec != "gzip" or rest[:2] != GZIP_MAGIC:
            raise CorruptCompressionError(f"{codec}: {len(rest)} bytes of trailing data after the stream")


def compress(data: bytes, codec: str) -> bytes:
    """``data`` compressed with ``gzip`` or ``zlib`` (for the producer and tests)."""
    if codec == "gzip":
        return gzip.compress(data, mtime=0)
    if codec == "zlib":
        return zlib.compress(data)
    raise ValueError(f"unknown compression {codec!r}: use one of {', '.join(CODECS)}")
