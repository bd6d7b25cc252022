"""The lake layer: an Iceberg table as one object, in the style of pyiceberg's ``Table``.

``LakeTable(spark, "lake.streaming_analytics.user_events")`` checks the name once and offers:

- ``table.inspect``: the metadata tables (snapshots, files, data files, manifests, partitions,
  history, refs, the metadata log and metadata files), properties, the current metadata file, and
  the one walk of the snapshot ancestry (:func:`icestream.lake.inspect.ancestry`) that the ingest's
  positions, its dedupe index and the position-keeping snapshot expiry all use;
- ``table.maintenance``: ``rewrite_data_files``, ``rewrite_manifests``, ``expire_snapshots`` (which
  can keep the ingest's positions) and ``remove_orphan_files``; :mod:`icestream.lake.routine` runs
  them in order as one scheduled plan (``icestream maintain``, notebook 09);
- ``table.versions``: ``VERSION AS OF`` / ``TIMESTAMP AS OF`` reads, counts at a version,
  incremental reads, tags, branches, write-audit-publish, rollback, adding a column, and
  ``append_window``.

**Statements.** Every operation that runs SQL builds a :class:`Statement`: the SQL text (names in
it validated, values bound as ``:name`` markers wherever Spark can bind them) and its arguments.
The table runs it and records it: ``table.statements`` holds the recent ones, oldest first, and
``table.last_statement`` the newest, so a reader can see and re-run exactly what an answer came
from. With :func:`show_statements` on (the notebooks turn it on in their first cell), each statement
also prints as it runs: one mechanism shows every read and write of a table where it happens.
Statements that read run through ``table.run`` and return a Spark DataFrame; statements that
change the table (``writes=True``: DDL, procedures) run through ``table.apply`` and return an
:class:`Outcome` carrying the statement and the output rows.

**Dry run.** ``LakeTable(spark, name, dry_run=True)`` records the statements that would change the
table without running them: each returns an :class:`Outcome` whose ``output`` is None, and
``table.statements`` lists the plan. Reads still run, so decisions that depend on the table (how
many snapshots to keep for the ingest's positions) are made on real metadata. A read that only the
DataFrame API can make (the incremental read's options) is recorded as a :class:`DataFrameCall`,
the exact call as text, beside the statements.

The summary keys the ingest writes into its snapshots live in :mod:`icestream.lake.summary`; the rule
that fills a column added to the table from ``properties`` is
:func:`icestream.lake.evolution.align_columns`; partition evolution, renames and type promotions made by
hand are :class:`icestream.lake.evolution.Evolution` (notebook 04).
"""

from __future__ import annotations

from icestream.lake.archive import expire_archive
from icestream.lake.ddl import qualified_name, readable_property, setup_tables, show_create_table, table_properties
from icestream.lake.evolution import Evolution, partition_transform, promoted_type
from icestream.lake.keyed import LIVE_FILTER, KeyedSpec, create_keyed_table, merge_statement
from icestream.lake.layout import table_layout
from icestream.lake.maintenance import sort_order_literal
from icestream.lake.metrics_table import (
    METRICS_VIEW,
    create_metrics_table,
    create_metrics_view,
    fold_statement,
    refresh_metrics,
)
from icestream.lake.routine import MaintenancePlan, results_frame, run_maintenance
from icestream.lake.statement import DataFrameCall, Outcome, Statement, show_statements
from icestream.lake.summary import METRICS_SOURCE_KEY
from icestream.lake.table import LakeTable, recreate_events_copy, setup_lake_tables
from icestream.lake.window import Window, event_time_slices

__all__ = [
    "LIVE_FILTER",
    "METRICS_SOURCE_KEY",
    "METRICS_VIEW",
    "DataFrameCall",
    "Evolution",
    "KeyedSpec",
    "LakeTable",
    "MaintenancePlan",
    "Outcome",
    "Statement",
    "Window",
    "create_keyed_table",
    "create_metrics_table",
    "create_metrics_view",
    "event_time_slices",
    "expire_archive",
    "fold_statement",
    "merge_statement",
    "partition_transform",
    "promoted_type",
    "qualified_name",
    "readable_property",
    "recreate_events_copy",
    "refresh_metrics",
    "results_frame",
    "run_maintenance",
    "setup_lake_tables",
    "setup_tables",
    "show_create_table",
    "show_statements",
    "sort_order_literal",
    "table_layout",
    "table_properties",
]
