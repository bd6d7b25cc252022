"""gzip and zlib payloads: recognised by header, decompressed within a cap, corruption refused."""

from __future__ import annotations

import gzip
import zlib

import pytest

from icestream.kinesis.compression import (
    CorruptCompressionError,
    DecompressedTooLargeError,
    compress,
    compression_of,
    decompress,
)

TEXT = b'{"event_id": "e1", "user_id": "u1"}' * 20


@pytest.mark.parametrize("level", [1, 6, 9, 0])
def test_zlib_headers_of_every_level_are_recognised(level: int) -> None:
    data = zlib.compress(TEXT, level)
    assert compression_of(data) == "zlib"
    assert decompress(data, len(TEXT)) == TEXT


def test_json_is_never_taken_for_compressed_data() -> None:
    assert compression_of(TEXT) is None
    assert compression_of(b"") is None


@pytest.mark.parametrize("codec", ["gzip", "zlib"])
def test_round_trip_at_exactly_the_cap(codec: str) -> None:
    data = compress(TEXT, codec)
    assert compression_of(data) == codec
    assert decompress(data, len(TEXT)) == TEXT
    with pytest.raises(DecompressedTooLargeError):
        decompress(data, len(TEXT) - 1)


def test_a_bomb_stops_at_the_cap() -> None:
    bomb = gzip.compress(b"\x00" * 5_000_000, compresslevel=1)  # about 22 KB that expand to 5 MB
    with pytest.raises(DecompressedTooLargeError, match="beyond 65536"):
        decompress(bomb, 65_536)


def test_concatenated_gzip_members_are_one_payload() -> None:
    assert decompress(gzip.compress(b"ab") + gzip.compress(b"cd"), 10) == b"abcd"
    with pytest.raises(DecompressedTooLargeError):  # the cap counts all members together
        decompress(gzip.compress(b"ab") + gzip.compress(b"cd"), 3)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (gzip.compress(TEXT, mtime=0)[:-6], "truncated"),
        (gzip.compress(TEXT, mtime=0)[:-4] + b"\x00\x00\x00\x00", "gzip"),  # wrong length in the trailer
        (zlib.compress(TEXT)[:-1] + b"\x00", "zlib"),  # wrong Adler-32
        (b"\x1f\x8bnot gzip at all", "gzip"),
        (zlib.compress(TEXT) + b"junk", "trailing"),
        (gzip.compress(TEXT, mtime=0) + b"junk", "trailing"),
    ],
)
def test_corrupt_streams_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(CorruptCompressionError, match=message):
        decompress(data, 10_000)


def test_unknown_codec_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown compression"):
        compress(b"x", "brotli")
