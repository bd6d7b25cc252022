"""Change streams in tests: settings with a fresh stream, a drain with a change spec, the table and the truth
as DuckDB reads them (shared by the integration tests and the SIGKILL campaign)."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from icestream.config import Settings, load_settings
from icestream.ingest.changes import ChangeSpec
from icestream.ingest.query import start_ingest
from icestream.kinesis.clients import ensure_stream
from icestream.lake.keyed import LIVE_FILTER
from icestream.lake.table import LakeTable
from icestream.queries import duckdb_engine as duck
from icestream.synthetic.entities import EntityStream

COMPARED = ("order_id", "customer", "status", "amount", "version", "updated_at")


def change_settings(prefix: str, **overrides: Any) -> Settings:
    """Settings naming a fresh 2-shard stream ``<prefix>-<random>`` and table ``<prefix>_<random>``."""
    suffix = uuid.uuid4().hex[:8]
    settings = load_settings(stream_name=f"{prefix}-{suffix}", table=f"{prefix}_{suffix}", **overrides)
    ensure_stream(settings, shard_count=2)
    return settings


def drain_changes(spark: Any, settings: Settings, spec: ChangeSpec, **options: Any) -> Any:
    """Ingest everything in the stream now as changes of ``spec``; return the ended query."""
    query = start_ingest(spark, settings, available_now=True, trigger_seconds=0, changes=spec, **options)
    assert query.await_termination(timeout=300), "the drain did not end"
    return query


def duckdb_rows(table: LakeTable) -> dict[int, tuple]:
    """The live rows as DuckDB reads the table's current metadata (it applies the delete files itself);
    ``updated_at`` as epoch microseconds."""
    location, _ = table.inspect.metadata_location()
    columns = ", ".join(COMPARED[:-1])
    connection = duck.connect()
    try:
        rows = connection.execute(
            f"SELECT {columns}, epoch_us(updated_at) FROM iceberg_scan('{location}') WHERE {LIVE_FILTER}"
        ).fetchall()
    finally:
        connection.close()
    return {row[0]: row for row in rows}


def expected_rows(stream: EntityStream) -> dict[int, tuple]:
    """The truth as :func:`duckdb_rows` reads it."""
    return {
        key: (*(row[name] for name in COMPARED[:-1]), round(row["updated_at"].timestamp() * 1_000_000))
        for key, row in stream.truth.items()
    }


def rejected_reasons(spark: Any, settings: Settings) -> Counter:
    """How many rejects of each reason the rejects table holds."""
    return Counter(row.reason for row in spark.table(settings.rejects_table_name).select("reason").collect())
