"""Bulk-load payloads straight into an events table, without Kinesis: for tests and benchmarks.

The streaming path (``icestream.ingest.query``) is how data normally arrives. This is the quick
way to give a query test or a query benchmark a table of realistic events: the same parser and
the same columns, with ``shard_id = 'bulk'`` and the record's index as its sequence number
(arrival time = event time). Invalid payloads are skipped and counted, not written.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from icestream.ingest.parse import ParsedEvent, parse_payload
from icestream.lake.ddl import checked_table_name
from icestream.lake.schema import table_columns

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BULK_SHARD = "bulk"


def load_payloads(
    spark: SparkSession,
    table: str,
    payloads: Iterable[tuple[bytes, str]],
    chunk_rows: int = 200_000,
    dedupe: bool = True,
) -> dict[str, int]:
    """Parse ``(payload, partition key)`` pairs and append the valid events to ``table``.

    Args:
        spark: The session.
        table: Qualified name of a table created by ``tables.create_events_table``.
        payloads: Payload bytes with their partition keys (e.g. from ``icestream.synthetic``).
        chunk_rows: Rows per append (one snapshot each), bounding the driver's memory.
        dedupe: Skip an event id already loaded, as the streaming ingest does.

    Returns:
        ``{"written": n, "skipped": m, "deduplicated": d}``.
    """
    import pandas as pd

    table = checked_table_name(table)
    schema = spark.table(table).select(*table_columns()).schema
    ingest_ts = datetime.now(UTC)
    counts = {"written": 0, "skipped": 0, "deduplicated": 0}
    seen: set[str] = set()
    rows: list[tuple] = []

    def flush() -> None:
        if rows:
            frame = pd.DataFrame(rows, columns=list(table_columns()))
            spark.createDataFrame(frame, schema).writeTo(table).append()
            counts["written"] += len(rows)
            rows.clear()

    for index, (data, key) in enumerate(payloads):
        parsed = parse_payload(data)
        if not isinstance(parsed, ParsedEvent):
            counts["skipped"] += 1
            continue
        if dedupe:
            if parsed.event_id in seen:
                counts["deduplicated"] += 1
                continue
            seen.add(parsed.event_id)
        device = (
            None
            if parsed.device_info is None
            else dict(zip(("device_type", "os", "app_version"), parsed.device_info, strict=True))
        )
        rows.append(
            (
                parsed.event_id,
                parsed.user_id,
                parsed.session_id,
                parsed.event_type,
                parsed.event_ts,
                parsed.properties,
                device,
                BULK_SHARD,
                str(index),
                key,
                parsed.event_ts,
                ingest_ts,
            )
        )
        if len(rows) >= chunk_rows:
            flush()
    flush()
    return counts
