"""The committed samples in data/samples/ still match the generator, and every sample event is valid."""

from __future__ import annotations

import json

from icestream.config import project_home
from icestream.synthetic.malformed import MALFORMED_KINDS, malformed_payload
from icestream.synthetic.samples import read_malformed_samples, sample_records
from icestream.synthetic.wire import read_records
from tests.unit.synthetic.ingest_rules import reject_reason

SAMPLES = project_home() / "data" / "samples"


def test_committed_samples_match_the_generator() -> None:
    records, malformed = sample_records()
    assert (SAMPLES / "events.jsonl").read_bytes() == b"".join(record.data + b"\n" for record in records)
    committed = read_malformed_samples(SAMPLES / "malformed.jsonl")
    assert tuple(committed) == MALFORMED_KINDS
    assert all(
        committed[row["kind"]] == malformed_payload(row["kind"], json.loads(records[0].data)) for row in malformed
    )


def test_sample_events_are_all_valid() -> None:
    records = list(read_records(SAMPLES / "events.jsonl"))
    assert 200 <= len(records) <= 500
    assert all(reject_reason(record.data) is None for record in records)
    assert all(record.partition_key == json.loads(record.data)["user_id"] for record in records)
    assert any(record.data.count(b'"experiment"') or record.data.count(b'"locale"') for record in records)
