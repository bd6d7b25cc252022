"""A tiny table to walk file by file (notebook 00): two small commits, every level of the tree on a page.

:func:`icestream.lake.layout.table_layout` walks any table; this module only makes the one the
workbook shows it on, ``<table>_layout_demo``, marked as the demo's so that it drops no table it
did not make (:mod:`icestream.lake.demo_tables`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icestream.config import LAYOUT_DEMO_SUFFIX
from icestream.lake.demo_tables import DEMO_PROPERTY, drop_demo_tables
from icestream.lake.statement import Statement
from icestream.lake.table import LakeTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icestream.config import Settings

# Two commits of fixed rows in two event-time hours: the second commit adds a second manifest to
# the current snapshot's manifest list, and the hour partitioning gives one data file per hour.
DEMO_COMMITS = (
    "INSERT INTO {name} VALUES "
    "('e-1', 'page_view', TIMESTAMP '2026-01-01 09:15:00'), "
    "('e-2', 'click', TIMESTAMP '2026-01-01 09:40:00'), "
    "('e-3', 'search', TIMESTAMP '2026-01-01 10:05:00')",
    "INSERT INTO {name} VALUES ('e-4', 'purchase', TIMESTAMP '2026-01-01 10:20:00')",
)


def create_layout_demo(spark: SparkSession, settings: Settings) -> LakeTable:
    """Drop and create ``<table>_layout_demo`` and commit :data:`DEMO_COMMITS` to it (two snapshots).

    The statements are recorded in the returned table's ``statements``, so a notebook can show them.

    Returns:
        The demo table.

    Raises:
        TableOwnershipError: If ``<table>_layout_demo`` exists and the demo did not make it.
    """
    demo = settings.companion(LAYOUT_DEMO_SUFFIX)
    table = LakeTable(spark, demo.table_name)
    table.apply(Statement(f"CREATE NAMESPACE IF NOT EXISTS {demo.namespace_name}", writes=True))
    drop_demo_tables(spark, (table.name,), LAYOUT_DEMO_SUFFIX)
    table.apply(
        Statement(
            f"CREATE TABLE {table.name} (event_id STRING, event_type STRING, event_ts TIMESTAMP) "
            f"USING iceberg PARTITIONED BY (hours(event_ts)) "
            f"TBLPROPERTIES ('{DEMO_PROPERTY}' = '{LAYOUT_DEMO_SUFFIX}')",  # marked in its creating commit
            writes=True,
        )
    )
    for commit in DEMO_COMMITS:
        table.apply(Statement(commit.format(name=table.name), writes=True))
    return table
