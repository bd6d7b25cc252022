"""A table's versions: reads as of a snapshot, tag, branch or time; writes that change its history.

Reads: ``VERSION AS OF`` / ``TIMESTAMP AS OF`` (:meth:`Versions.as_of`), counts at a version,
incremental reads between snapshots, the columns a version has. Writes: tags, branches,
write-audit-publish (:meth:`Versions.audit_append` then :meth:`Versions.fast_forward`), rollback and
adding a column. Writes that change history are shown on a copy (:func:`icestream.lake.table.recreate_events_copy`): the
ingest keeps its Kinesis positions in the events table's snapshot summaries, so rolling that table
back would make it read again what the rollback removed.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from icestream.errors import ConfigError
from icestream.lake.evolution import ADDABLE_TYPES, align_columns
from icestream.lake.statement import Outcome, Statement, snapshot_id_literal
from icestream.timestamps import to_micros
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame

    from icestream.lake.table import LakeTable
    from icestream.lake.window import Window

Version = int | str | datetime  # a snapshot id, a tag or branch name, or a point in time
REF_KINDS = ("TAG", "BRANCH")


class Versions:
    """Time travel, refs and history-changing writes on one table (``table.versions``)."""

    def __init__(self, table: LakeTable) -> None:
        self._table = table

    # -- reading a version ----------------------------------------------------------------------
    def as_of(self, version: Version | None = None) -> str:
        """The table name with a ``VERSION AS OF`` or ``TIMESTAMP AS OF`` clause, for a ``FROM``.

        Spark cannot bind parameters in these clauses, so each kind of value is checked instead:
        an id must be an integer, a ref name an identifier, a time a datetime (written as epoch
        microseconds).

        Args:
            version: Snapshot id, tag or branch name, a datetime, or None for the current state.
        """
        name = self._table.name
        if version is None:
            return name
        if isinstance(version, datetime):
            return f"{name} TIMESTAMP AS OF timestamp_micros({to_micros(version)})"
        if isinstance(version, str) and not version.lstrip("-").isdigit():
            return f"{name} VERSION AS OF '{validate_identifier(version, 'tag or branch')}'"
        return f"{name} VERSION AS OF {snapshot_id_literal(version)}"

    def row_count(self, version: Version | None = None) -> int:
        """Rows in the table at ``version`` (None: now), counted by reading it."""
        return int(self._table.run(Statement(f"SELECT count(*) AS n FROM {self.as_of(version)}")).first().n)

    def total_records(self, snapshot_id: int) -> int:
        """Rows in the table as of a snapshot, from its summary (no data read).

        Raises:
            ConfigError: If the table has no such snapshot.
        """
        row = self._table.run(
            Statement(
                "SELECT CAST(summary['total-records'] AS BIGINT) AS records "
                f"FROM {self._table.name}.snapshots WHERE snapshot_id = :id",
                {"id": snapshot_id_literal(snapshot_id)},
            )
        ).first()
        if row is None:
            raise ConfigError(f"{self._table.name} has no snapshot {snapshot_id} (expired, or from another table).")
        return int(row.records)

    def counts_by_type(self, version: Version | None = None) -> pd.DataFrame:
        """Events by type at ``version`` (see :meth:`as_of`): ``event_type``, ``events``."""
        return self._table.run(
            Statement(
                f"SELECT event_type, count(*) AS events FROM {self.as_of(version)} "
                "GROUP BY event_type ORDER BY event_type"
            )
        ).toPandas()

    def compare_counts_by_type(self, before: Version, after: Version) -> pd.DataFrame:
        """Events by type at two points, side by side.

        Returns:
            ``event_type``, ``before``, ``after``, ``change`` (types absent at a point count 0).
        """
        earlier = self.counts_by_type(before).set_index("event_type")["events"].rename("before")
        later = self.counts_by_type(after).set_index("event_type")["events"].rename("after")
        frame = earlier.to_frame().join(later, how="outer").fillna(0).astype("int64")
        frame["change"] = frame["after"] - frame["before"]
        return frame.reset_index().sort_values("event_type", ignore_index=True)

    def appended_between(self, start_snapshot_id: int, end_snapshot_id: int) -> DataFrame:
        """Rows appended after ``start_snapshot_id`` up to and including ``end_snapshot_id``.

        An incremental read (Spark reader options, no SQL): Iceberg plans only the files those
        snapshots added. It reads ``append`` snapshots and skips ``replace`` ones (compaction moves
        rows, it adds none).
        """
        return (
            self._table.spark.read.format("iceberg")
            .option("start-snapshot-id", str(snapshot_id_literal(start_snapshot_id)))
            .option("end-snapshot-id", str(snapshot_id_literal(end_snapshot_id)))
            .load(self._table.name)
        )

    def columns_at(self, version: Version | None = None) -> list[str]:
        """The columns a read at ``version`` returns: a snapshot is read with the schema it was written with."""
        return self._table.run(Statement(f"SELECT * FROM {self.as_of(version)} LIMIT 0")).columns

    # -- refs -------------------------------------------------------------------------------------
    def create_tag(self, tag: str, snapshot_id: int) -> Outcome:
        """Name a snapshot (``CREATE OR REPLACE TAG``): the name outlives snapshot expiry."""
        return self._table.apply(
            Statement(
                f"ALTER TABLE {self._table.name} CREATE OR REPLACE TAG {validate_identifier(tag, 'tag')} "
                f"AS OF VERSION {snapshot_id_literal(snapshot_id)}",
                writes=True,
            )
        )

    def create_branch(self, branch: str, snapshot_id: int | None = None) -> Outcome:
        """Create (or reset) a branch at ``snapshot_id`` (default: the current snapshot)."""
        at = "" if snapshot_id is None else f" AS OF VERSION {snapshot_id_literal(snapshot_id)}"
        return self._table.apply(
            Statement(
                f"ALTER TABLE {self._table.name} CREATE OR REPLACE BRANCH {validate_identifier(branch, 'branch')}{at}",
                writes=True,
            )
        )

    def drop_ref(self, name: str, kind: str) -> Outcome:
        """Drop a tag or branch if it exists (``kind``: ``TAG`` or ``BRANCH``).

        Raises:
            ConfigError: If ``kind`` is neither.
        """
        if kind.upper() not in REF_KINDS:
            raise ConfigError(f"ref kind {kind!r}: choose TAG or BRANCH.")
        return self._table.apply(
            Statement(
                f"ALTER TABLE {self._table.name} DROP {kind.upper()} IF EXISTS {validate_identifier(name, kind)}",
                writes=True,
            )
        )

    # -- write-audit-publish and rollback --------------------------------------------------------------
    def audit_append(self, base_snapshot_id: int, head: int | str) -> pd.DataFrame:
        """Checks a write must pass before it is published (the "audit" of write-audit-publish).

        Audits only what the write added: the rows appended after ``base_snapshot_id`` up to
        ``head``, read incrementally.

        Args:
            base_snapshot_id: The snapshot the write started from (e.g. ``main`` when the branch was made).
            head: Where the write ended: a snapshot id, or a branch name for its newest snapshot.

        Returns:
            One row: ``rows`` added, ``missing_event_id``, ``missing_event_ts``,
            ``duplicate_event_ids`` (ids repeated within the write), ``ids_already_in_table`` (ids
            the base snapshot has) and ``passed`` (rows were added and every count is zero).

        Raises:
            ConfigError: If ``head`` names no branch of the table.
        """
        import pandas as pd
        from pyspark.sql import functions as F  # noqa: N812 - the usual alias

        inspect = self._table.inspect
        head_id = inspect.current_snapshot_id(head) if isinstance(head, str) else snapshot_id_literal(head)
        if head_id is None:
            raise ConfigError(f"{self._table.name} has no branch {head!r}.")
        checks = dict.fromkeys(("rows", "missing_event_id", "missing_event_ts", "duplicate_event_ids"), 0)
        checks["ids_already_in_table"] = 0
        if head_id != base_snapshot_id:
            added = self.appended_between(base_snapshot_id, head_id)
            missing_id = F.count_if(F.col("event_id").isNull())
            checks = (
                added.agg(
                    F.count(F.lit(1)).alias("rows"),
                    missing_id.alias("missing_event_id"),
                    F.count_if(F.col("event_ts").isNull()).alias("missing_event_ts"),
                    (F.count(F.lit(1)) - F.countDistinct("event_id") - missing_id).alias("duplicate_event_ids"),
                )
                .first()
                .asDict()
            )
            base = self._table.spark.read.option("snapshot-id", str(snapshot_id_literal(base_snapshot_id)))
            base_ids = base.table(self._table.name).select("event_id").distinct()
            checks["ids_already_in_table"] = added.select("event_id").distinct().join(base_ids, "event_id").count()
        frame = pd.DataFrame([checks])
        problems = frame[["missing_event_id", "missing_event_ts", "duplicate_event_ids", "ids_already_in_table"]]
        frame["passed"] = (problems.sum(axis=1) == 0) & (frame["rows"] > 0)
        return frame

    def fast_forward(self, branch: str, to: str) -> Outcome:
        """Publish: move ``branch`` (usually ``main``) forward to the head of ``to``.

        Returns:
            The outcome; its output: ``branch_updated``, ``previous_ref``, ``updated_ref``.
        """
        return self._table.apply(
            self._table.procedure(
                "fast_forward",
                branch=f"'{validate_identifier(branch, 'branch')}'",
                to=f"'{validate_identifier(to, 'branch')}'",
            )
        )

    def rollback_to_snapshot(self, snapshot_id: int) -> Outcome:
        """Make an earlier snapshot current again; later snapshots stay in the metadata.

        Returns:
            The outcome; its output: ``previous_snapshot_id``, ``current_snapshot_id``.
        """
        return self._table.apply(
            self._table.procedure("rollback_to_snapshot", snapshot_id=str(snapshot_id_literal(snapshot_id)))
        )

    # -- schema evolution and writing windows -------------------------------------------------------------
    def add_column(self, column: str, data_type: str = "STRING") -> Outcome | None:
        """Add an optional column: a metadata-only change, no data file is rewritten.

        Returns:
            The outcome, or None when the column is already there (re-runs).

        Raises:
            ConfigError: If ``data_type`` is not one of :data:`~icestream.lake.evolution.ADDABLE_TYPES`.
        """
        if data_type.upper() not in ADDABLE_TYPES:
            raise ConfigError(f"column type {data_type!r}: choose one of {', '.join(ADDABLE_TYPES)}.")
        column = validate_identifier(column, "column")
        if column in self.columns_at():
            return None
        return self._table.apply(
            Statement(f"ALTER TABLE {self._table.name} ADD COLUMN {column} {data_type.upper()}", writes=True)
        )

    def append_window(self, source: LakeTable, span: Window, branch: str | None = None) -> int:
        """Append the source's events in ``span`` to this table (or its ``branch``); one snapshot.

        A column this table has and the source lacks is filled by the ingest's rule
        (:func:`~icestream.lake.evolution.align_columns`). The write goes through the DataFrame API
        (``writeTo(...).append()``), not SQL, so it records no statement.

        Returns:
            The rows appended.
        """
        spark = self._table.spark
        fields = spark.table(self._table.name).schema.fields
        rows = align_columns(spark.table(source.name).where(span.condition()), fields)
        count = rows.count()
        rows.writeTo(self._table.branch(branch) if branch else self._table.name).append()
        return count
