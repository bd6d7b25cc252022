"""Running the ingest to the end of a stream, and what the tables hold afterwards."""

from __future__ import annotations

from collections import Counter
from typing import Any

from icestream.config import Settings
from icestream.ingest.query import start_ingest


def drain(spark: Any, settings: Settings, timeout: float = 300, **options: Any):
    """Ingest everything in the stream now with one ``available_now`` query; return the ended query.

    Raises:
        AssertionError: If the query has not ended after ``timeout`` seconds (a hang, not lost records).
        IngestError: If the query failed.
    """
    query = start_ingest(spark, settings, available_now=True, trigger_seconds=0, **options)
    assert query.await_termination(timeout=timeout), f"the drain did not end within {timeout:g} s"
    return query


def refresh_tables(spark: Any, settings: Settings, *others: str) -> None:
    """Forget what this session cached of the events and rejects tables (and ``others``).

    Needed before reading or ingesting after another process (a killed ingest, a second writer)
    committed: Spark's catalog would otherwise go on reading the snapshot it saw last.
    """
    for table in (settings.table_name, settings.rejects_table_name, *others):
        spark.catalog.refreshTable(table)


def table_state(spark: Any, settings: Settings) -> tuple[Counter, Counter]:
    """How often each event id is in the events table, and each (shard, sequence number) in the rejects table."""
    events = Counter(row.event_id for row in spark.table(settings.table_name).select("event_id").collect())
    rejects = Counter(
        (row.shard_id, row.sequence_number)
        for row in spark.table(settings.rejects_table_name).select("shard_id", "sequence_number").collect()
    )
    return events, rejects


def assert_accounted(progress: list[dict[str, Any]]) -> None:
    """Every record each batch read was written, rejected, deduplicated or replayed."""
    for batch in progress:
        assert batch["num_input_rows"] == (
            batch["written"] + batch["rejected"] + batch["deduplicated"] + batch["replayed"]
        ), batch
