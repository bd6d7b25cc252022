"""What a generated record is (its kind, one per record) and what some events also are (flags).

Kinds partition the records: each record has exactly one, so the kinds add up to the records sent.
Flags overlap: a late event can also carry an extra field, and one flag counts events that were
never sent at all. Shown in one column, the two add up to more than the records; kept apart, each
table adds up to what it describes.
"""

from __future__ import annotations

from collections.abc import Mapping

from icestream.synthetic.malformed import KINESIS_OVERSIZED, MALFORMED_KINDS

VALID_KINDS = ("event", "duplicate")
RECORD_KINDS = (*VALID_KINDS, *MALFORMED_KINDS, KINESIS_OVERSIZED, "order")
FLAG_DESCRIPTIONS = {
    "late": "clean events sent 30 s to 10 min after their event time",
    "extra_fields": "clean events with an unknown top-level field (the ingest keeps it in properties)",
    "anomaly_extra": "clean events an injected spike or burst added",
    "anomaly_dropped": "events an injected drop left out (never generated, so not among the records)",
}


def kinds_and_flags(counts: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """Split a generator's counts into record kinds and flags.

    Args:
        counts: Counts by kind and by flag, as :attr:`EventGenerator.counts` keeps them.

    Returns:
        The kinds that occurred, in :data:`RECORD_KINDS` order (they sum to the records), and every
        other count, the flags, in :data:`FLAG_DESCRIPTIONS` order then by name (they overlap).
    """
    kinds = {kind: int(counts[kind]) for kind in RECORD_KINDS if counts.get(kind, 0)}
    order = {flag: index for index, flag in enumerate(FLAG_DESCRIPTIONS)}
    others = sorted(
        (name for name in counts if name not in RECORD_KINDS), key=lambda name: (order.get(name, len(order)), name)
    )
    return kinds, {name: int(counts[name]) for name in others}
