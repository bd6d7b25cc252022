"""A realistic, seeded stream of user events in the wire format of :mod:`icestream.lake.schema`.

- :mod:`~icestream.synthetic.model`: the event model (types, funnel, properties, devices, daily curve).
- :mod:`~icestream.synthetic.generator`: what to generate (:class:`GeneratorConfig`) and the generator
  itself: sessions, rates, the placement of anomalies, duplicates, late and malformed records.
- :mod:`~icestream.synthetic.schedule`: units happen in event-time order and leave in send order, within
  an exact record count.
- :mod:`~icestream.synthetic.ground_truth`: the anomalies to inject and the ground-truth file.
- :mod:`~icestream.synthetic.second_kind`: opt-in order events on the same stream, a field added mid-run,
  and the truth per table.
- :mod:`~icestream.synthetic.kinds`: record kinds (one per record) and flags (overlapping), counted apart.
- :mod:`~icestream.synthetic.malformed`: the malformed kinds and their payloads.
- :mod:`~icestream.synthetic.wire`: records, the timestamp format, encoding and reading payload files.
- :mod:`~icestream.synthetic.samples`: the committed samples in ``data/samples/``.
"""

from icestream.synthetic.entities import ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER, EntityStream, apply_rule, order_changes
from icestream.synthetic.generator import RUN_ID_PROPERTY, EventGenerator, GeneratorConfig, backfill_config, generate
from icestream.synthetic.ground_truth import parse_anomalies, read_ground_truth
from icestream.synthetic.kinds import FLAG_DESCRIPTIONS
from icestream.synthetic.malformed import MALFORMED_DESCRIPTIONS, MALFORMED_KINDS
from icestream.synthetic.model import EVENT_TYPES, PROPERTY_FIELDS, expected_type_shares
from icestream.synthetic.second_kind import (
    NEW_FIELD,
    ORDER_EVENT_TYPE,
    TableTruth,
    id_checksum,
    read_tables_truth,
    table_of,
    tables_truth_path,
)
from icestream.synthetic.wire import decode_events

__all__ = [
    "EVENT_TYPES",
    "FLAG_DESCRIPTIONS",
    "MALFORMED_DESCRIPTIONS",
    "MALFORMED_KINDS",
    "NEW_FIELD",
    "ORDER_COLUMNS",
    "ORDER_EVENT_TYPE",
    "ORDER_KEY",
    "ORDER_ORDER",
    "PROPERTY_FIELDS",
    "RUN_ID_PROPERTY",
    "EntityStream",
    "EventGenerator",
    "GeneratorConfig",
    "TableTruth",
    "apply_rule",
    "backfill_config",
    "decode_events",
    "expected_type_shares",
    "generate",
    "id_checksum",
    "order_changes",
    "parse_anomalies",
    "read_ground_truth",
    "read_tables_truth",
    "table_of",
    "tables_truth_path",
]
