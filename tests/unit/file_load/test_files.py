"""Parsing one file for ``icestream load``: the same reasons as the stream, repeats dropped, one meta row."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime

from icestream.file_load.files import SourceFile, parse_file
from icestream.ingest.dedupe import Batch
from icestream.ingest.reading.record_rows import ROW_FIELDS

SOURCE = SourceFile("file:/data/events.jsonl", 123, datetime(2026, 11, 21, 6, 0, tzinfo=UTC))


def event(number: int) -> bytes:
    return json.dumps(
        {"event_id": f"ev-{number}", "user_id": "u1", "event_type": "click", "event_ts": "2026-11-21T05:00:00Z"}
    ).encode()


def rows(content: bytes, dedupe_ids: bool = True) -> list[dict]:
    return [dict(zip(ROW_FIELDS, row, strict=True)) for row in parse_file(SOURCE, content, dedupe_ids=dedupe_ids)]


def test_events_rejects_and_repeats() -> None:
    content = b"\n".join([event(1), b"{broken", event(2), event(1), b"", b"[1]", event(3)]) + b"\n"
    parsed = rows(content)
    kinds = [(row["kind"], row["sequence_number"]) for row in parsed]
    assert kinds == [("event", "1"), ("reject", "2"), ("event", "3"), ("reject", "6"), ("event", "7"), ("meta", None)]
    assert [row["ordinal"] for row in parsed if row["kind"] == "event"] == [0, 1, 2]
    assert {row["shard_id"] for row in parsed} == {SOURCE.shard_id}
    assert [row["reason"] for row in parsed if row["kind"] == "reject"] == ["invalid_json", "not_an_object"]
    meta = parsed[-1]
    counts = json.loads(meta["meta"])
    assert (counts["lines"], counts["good"], counts["rejected"], counts["deduplicated"]) == (6, 4, 2, 1)
    assert len(Batch.unpack({SOURCE.shard_id: meta["raw_data"]})) == 3
    assert all(row["arrival_ts"] == SOURCE.modified for row in parsed[:-1])


def test_gzip_gives_the_same_rows_and_dedupe_can_be_off() -> None:
    content = b"\n".join([event(1), event(1)])
    assert rows(gzip.compress(content)) == rows(content)
    assert sum(row["kind"] == "event" for row in rows(content, dedupe_ids=False)) == 2


def test_a_file_changed_in_place_is_a_new_file() -> None:
    touched = SourceFile(SOURCE.path, SOURCE.size, datetime(2026, 11, 22, tzinfo=UTC))
    grown = SourceFile(SOURCE.path, SOURCE.size + 1, SOURCE.modified)
    assert len({SOURCE.key, touched.key, grown.key}) == 3
    assert SOURCE.key == SourceFile(SOURCE.path, SOURCE.size, SOURCE.modified).key
