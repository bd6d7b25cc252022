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
- ``table.show_create()`` (its DDL as Iceberg reports it) and ``table.layout()`` (its current
  snapshot's files, walked from the catalog down, :mod:`icestream.lake.layout`).

:func:`setup_tables` is the one way the workbook's tables are made (namespace, events, rejects, the
raw archive when on; idempotent): it returns each as a ``LakeTable`` that recorded its set-up.

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
:func:`icestream.lake.table_evolution.align_columns`; partition evolution, renames and type promotions made by
hand are :class:`icestream.lake.table_evolution.Evolution` (notebook 04).
"""

from __future__ import annotations

from icestream.face import Face

_FACE = Face(
    __name__,
    {
        "Evolution": "icestream.lake.table_evolution",
        "KeyedSpec": "icestream.lake.keyed",
        "LIVE_FILTER": "icestream.lake.keyed",
        "LakeTable": "icestream.lake.table",
        "METRICS_SOURCE_KEY": "icestream.lake.summary",
        "METRICS_VIEW": "icestream.lake.continuous_aggregate",
        "Statement": "icestream.lake.statement",
        "Window": "icestream.lake.window",
        "create_keyed_table": "icestream.lake.keyed",
        "event_time_slices": "icestream.lake.window",
        "merge_statement": "icestream.lake.keyed",
        "qualified_name": "icestream.lake.ddl",
        "recreate_events_copy": "icestream.lake.table",
        "refresh_metrics": "icestream.lake.continuous_aggregate",
        "setup_tables": "icestream.lake.table",
        "show_statements": "icestream.lake.statement",
        "statements_hidden": "icestream.lake.statement",
        "sort_order_literal": "icestream.lake.maintenance",
    },
)
__all__ = _FACE.names
__getattr__ = _FACE.get
__dir__ = _FACE.dir
