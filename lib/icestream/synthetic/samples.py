"""The committed samples in ``data/samples/``: 300 clean events and one malformed record per kind.

Regenerate them after a deliberate change to the generator with::

    python -c "from pathlib import Path; from icestream.synthetic.samples import write_samples
    write_samples(Path('data/samples'))"
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from icestream.synthetic.generator import backfill_config, generate
from icestream.synthetic.malformed import MALFORMED_DESCRIPTIONS, MALFORMED_KINDS, malformed_payload
from icestream.synthetic.wire import Record

SAMPLE_EVENTS_FILE = "events.jsonl"
SAMPLE_MALFORMED_FILE = "malformed.jsonl"
SAMPLE_SEED = 2026
SAMPLE_END = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)


def sample_records() -> tuple[list[Record], list[dict[str, Any]]]:
    """The records behind ``data/samples/``: 300 clean events, one malformed of each kind.

    Returns:
        The clean event records (no duplicates or bad records), and one row per malformed kind
        (``kind``, ``description``, ``size``, ``payload_base64``).
    """
    config = backfill_config(
        hours=0.5,
        records=300,
        end=SAMPLE_END,
        seed=SAMPLE_SEED,
        users=60,
        duplicate_rate=0.0,
        late_rate=0.0,
        bad_rate=0.0,
        extra_field_rate=0.03,
    )
    records, _ = generate(config)
    base = json.loads(records[0].data)
    malformed = [
        {
            "kind": kind,
            "description": MALFORMED_DESCRIPTIONS[kind],
            "size": len(payload),
            "payload_base64": base64.b64encode(payload).decode(),
        }
        for kind in MALFORMED_KINDS
        for payload in [malformed_payload(kind, base)]
    ]
    return records, malformed


def write_samples(folder: Path) -> tuple[Path, Path]:
    """Write the committed samples (see the module docstring for the command).

    Args:
        folder: Usually ``data/samples``.

    Returns:
        The events file and the malformed file.
    """
    records, malformed = sample_records()
    folder.mkdir(parents=True, exist_ok=True)
    events_path, malformed_path = folder / SAMPLE_EVENTS_FILE, folder / SAMPLE_MALFORMED_FILE
    events_path.write_bytes(b"".join(record.data + b"\n" for record in records))
    malformed_path.write_text("".join(json.dumps(row) + "\n" for row in malformed), encoding="utf-8")
    return events_path, malformed_path


def read_malformed_samples(path: Path) -> dict[str, bytes]:
    """Read ``data/samples/malformed.jsonl`` into kind → payload bytes."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["kind"]: base64.b64decode(row["payload_base64"]) for row in rows}
