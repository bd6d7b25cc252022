"""A table's versions: reads as of a snapshot, tag, branch or time; writes that change its history.

Reads: ``VERSION AS OF`` / ``TIMESTAMP AS OF`` (:meth:`Versions.as_of`), counts at a version,
incremental reads between snapshots, the columns a version has. Writes: appends of a window
(``INSERT INTO ... SELECT``), tags, branches, write-audit-publish (Spark's own: the table property
``write.wap.enabled`` and the session's ``spark.wap.branch``, :meth:`Versions.wap_branch`; then
:meth:`Versions.audit_append` and :meth:`Versions.fast_forward`), rollback and adding a column.
Every one is a recorded statement, except the incremental read, which only the DataFrame API can
make: it is recorded as the exact call (:class:`~icestream.lake.statement.DataFrameCall`).

Writes that change history are shown on a copy (:func:`icestream.lake.table.recreate_events_copy`): the
ingest keeps its Kinesis positions in the events table's snapshot summaries, so rolling that table
back would make it read again what the rollback removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from icestream.errors import ConfigError
from icestream.lake.statement import DataFrameCall, Outcome, Statement, snapshot_id_literal, timestamp_literal
from icestream.lake.table_evolution import ADDABLE_TYPES
from icestream.lake.window import WINDOW_SQL
from icestream.runtime.handles import first_row
from icestream.timestamps import as_utc
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
        an id must be an integer, a ref name an identifier, a time an aware datetime (written as a
        readable UTC ``TIMESTAMP`` literal, to the microsecond).

        Args:
            version: Snapshot id, tag or branch name, a datetime, or None for the current state.
        """
        name = self._table.name
        if version is None:
            return name
        if isinstance(version, datetime):
            return f"{name} TIMESTAMP AS OF {timestamp_literal(as_utc(version))}"
        if isinstance(version, str) and not version.lstrip("-").isdigit():
            return f"{name} VERSION AS OF '{validate_identifier(version, 'tag or branch')}'"
        return f"{name} VERSION AS OF {snapshot_id_literal(version)}"

    def row_count(self, version: Version | None = None) -> int:
        """Rows in the table at ``version`` (None: now), counted by reading it."""
        return int(first_row(self._table.run(Statement(f"SELECT count(*) AS n FROM {self.as_of(version)}"))).n)

    @staticmethod
    def nearest_half(snapshots: pd.DataFrame, history: pd.DataFrame) -> int:
        """The snapshot on the current line, before the current one, whose rows are nearest half of today's.

        Halfway by rows, not by commits: the ingest's first batches take the backlog and its live ones
        add little, so the middle commit can hold nearly every row and a comparison with it shows nothing.

        Args:
            snapshots: ``snapshot_id``, ``total_records`` (``table.inspect.snapshots()``).
            history: ``snapshot_id``, ``is_current_ancestor``, oldest first (``table.inspect.history()``).

        Raises:
            ConfigError: If the current line has fewer than two snapshots.
        """
        line = history.loc[history["is_current_ancestor"], "snapshot_id"].tolist()
        if len(line) < 2:
            raise ConfigError("The table needs at least two snapshots to compare: run 02_stream_ingest first.")
        totals = snapshots.set_index("snapshot_id")["total_records"]
        half = totals[line[-1]] / 2
        return int(min(line[:-1], key=lambda snapshot: abs(totals[snapshot] - half)))

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

        An incremental read (Spark reader options; Spark 3.5's SQL cannot pass read options): Iceberg
        plans only the files those snapshots added. It reads ``append`` snapshots and skips
        ``replace`` ones (compaction moves rows, it adds none). The call is recorded on the table
        (``table.last_statement``).
        """
        start, end = str(snapshot_id_literal(start_snapshot_id)), str(snapshot_id_literal(end_snapshot_id))
        self._table.record(
            DataFrameCall(
                'spark.read.format("iceberg")'
                f'.option("start-snapshot-id", "{start}").option("end-snapshot-id", "{end}")'
                f'.load("{self._table.name}")'
            )
        )
        reader = self._table.spark.read.format("iceberg")
        return reader.option("start-snapshot-id", start).option("end-snapshot-id", end).load(self._table.name)

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
    def enable_wap(self) -> Outcome:
        """Set ``write.wap.enabled``: the table accepts writes staged by the session's WAP settings."""
        return self._table.apply(
            Statement(f"ALTER TABLE {self._table.name} SET TBLPROPERTIES ('write.wap.enabled' = 'true')", writes=True)
        )

    @contextmanager
    def wap_branch(self, branch: str) -> Iterator[None]:
        """Spark's write-audit-publish: inside, the session writes to and reads from ``branch``.

        ``SET spark.wap.branch = <branch>`` sends every write to a WAP-enabled table (:meth:`enable_wap`)
        to that branch instead of ``main``, and reads of the plain table name read the branch, so a
        job's own checks see what it wrote while other readers of ``main`` do not. ``RESET`` on the
        way out, even after an error. The branch must exist (:meth:`create_branch`).
        """
        name = validate_identifier(branch, "branch")
        self._table.run(Statement(f"SET spark.wap.branch = {name}"))
        try:
            yield
        finally:
            self._table.run(Statement("RESET spark.wap.branch"))

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
            checks = first_row(
                added.agg(
                    F.count(F.lit(1)).alias("rows"),
                    missing_id.alias("missing_event_id"),
                    F.count_if(F.col("event_ts").isNull()).alias("missing_event_ts"),
                    (F.count(F.lit(1)) - F.countDistinct("event_id") - missing_id).alias("duplicate_event_ids"),
                )
            ).asDict()
            base = self._table.spark.read.option("versionAsOf", str(snapshot_id_literal(base_snapshot_id)))
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
            ConfigError: If ``data_type`` is not one of :data:`~icestream.lake.table_evolution.ADDABLE_TYPES`.
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

        One recorded ``INSERT INTO ... SELECT`` (``table.last_statement``), after a recorded count
        of the rows it will add. A column this table has and the source lacks is filled by the
        ingest's rule (:func:`~icestream.lake.table_evolution.align_columns`): ``TRY_CAST(properties['<column>']
        AS <type>)``.

        Returns:
            The rows appended.
        """
        fields = self._table.spark.table(self._table.name).schema.fields
        present = self._table.spark.table(source.name).columns
        added = [
            f"TRY_CAST(properties['{validate_identifier(column.name, 'column')}'] AS "
            f"{column.dataType.simpleString().upper()}) AS {column.name}"
            for column in fields
            if column.name not in present
        ]
        if [column.name for column in fields[: len(present)]] == present:
            selected = ["*", *added]  # the usual case: the same columns, maybe some added after them
        else:
            selected = [validate_identifier(column.name, "column") for column in fields if column.name in present]
            selected += added
        where = f"FROM {source.name} WHERE {WINDOW_SQL}"
        count = int(first_row(self._table.run(Statement(f"SELECT count(*) AS n {where}", span.args))).n)
        target = self._table.branch(branch) if branch else self._table.name
        columns = ",\n       ".join(selected)
        self._table.apply(Statement(f"INSERT INTO {target}\nSELECT {columns}\n{where}", span.args, writes=True))
        return count
