"""Row-level writes: copy-on-write or merge-on-read, ``MERGE INTO`` / ``UPDATE`` / ``DELETE``, commit properties.

- :data:`ROW_LEVEL_MODES`: how Iceberg's Spark writer changes rows, set per table and per operation
  by the properties ``write.delete.mode``, ``write.update.mode`` and ``write.merge.mode``.
  ``copy-on-write`` rewrites each data file that holds a changed row (reads stay as cheap as
  before; writes cost a file per touched file). ``merge-on-read`` writes only the new rows and a
  *position delete* file naming the old rows' places (cheap writes; every read applies the delete
  files until compaction rewrites the data files with them, the read amplification the health
  report shows as delete files and rows deleted: :mod:`icestream.queries.health`).
- :class:`RowLevel` (``RowLevel(table)``): the mode and the DML a person runs, each a recorded
  :class:`~icestream.lake.statement.Statement` of the table.
- :func:`with_commit_properties`: runs a statement with Iceberg snapshot-summary properties, the
  way ``writeTo(...).option("snapshot-property.<key>", ...)`` does for appends; Spark SQL's
  ``MERGE INTO`` has no such option, Iceberg's ``CommitMetadata.withCommitProperties`` does, and it
  is called here through the Py4J gateway with a Python ``Callable``. This is what lets a per-batch
  ``MERGE`` commit a table's Kinesis positions in its own snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from icestream.errors import ConfigError
from icestream.lake.statement import Outcome, Statement
from icestream.runtime.handles import first_row
from icestream.runtime.handles import jvm as jvm_of
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

    from icestream.lake.table import LakeTable

ROW_LEVEL_MODES = ("copy-on-write", "merge-on-read")
MODE_PROPERTIES = ("write.delete.mode", "write.update.mode", "write.merge.mode")
# What a row-level commit wrote and removed (Iceberg snapshot-summary keys).
COMMIT_COUNTS = (
    "added-data-files",
    "deleted-data-files",
    "added-delete-files",
    "removed-delete-files",
    "added-position-deletes",
    "removed-position-deletes",
    "added-records",
    "deleted-records",
)
# The rows a commit itself deleted by position. Iceberg (1.10, file-scoped deletes) rewrites a data
# file's earlier delete file into the one a new commit writes for that file and removes the old one, so
# added-position-deletes counts every earlier position again: only added minus removed is this commit's.
POSITION_DELETES = "position-deletes"


class _JavaCallable:
    """A Python function the JVM can call as a ``java.util.concurrent.Callable`` (through Py4J's callback server)."""

    def __init__(self, function: Callable[[], object]) -> None:
        self.function = function
        self.result: object = None
        self.error: BaseException | None = None

    def call(self) -> None:
        try:
            self.result = self.function()
        except BaseException as error:  # noqa: BLE001 - handed back to the caller in Python, not lost in the JVM
            self.error = error

    class Java:
        implements = ("java.util.concurrent.Callable",)


def with_commit_properties(spark: SparkSession, properties: Mapping[str, str], action: Callable[[], Any]) -> Any:
    """Run ``action`` (Spark SQL that commits to Iceberg tables) with ``properties`` in each commit's snapshot summary.

    Iceberg's ``CommitMetadata.withCommitProperties`` sets the properties for the commits made on
    the calling JVM thread; PySpark's Py4J runs the action's own JVM calls on that same thread.

    Args:
        spark: The session.
        properties: Snapshot-summary keys and values.
        action: What to run, e.g. ``lambda: spark.sql("MERGE INTO ...")``.

    Returns:
        What ``action`` returned.

    Raises:
        Whatever ``action`` raised, as it raised it.
    """
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)
    jvm = jvm_of(spark)
    java_properties = jvm.java.util.HashMap()
    for key, value in properties.items():
        java_properties.put(str(key), str(value))
    task = _JavaCallable(action)
    throws = jvm.java.lang.Class.forName("java.lang.RuntimeException")
    jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(java_properties, task, throws)
    if task.error is not None:
        raise task.error
    return task.result


class RowLevel:
    """Row-level changes of one table, each a recorded statement (see the module docstring)."""

    def __init__(self, table: LakeTable) -> None:
        self._table = table

    def mode(self) -> dict[str, str]:
        """The table's mode per operation (Iceberg's default, copy-on-write, when a property is unset)."""
        properties = self._table.inspect.properties()
        return {name: properties.get(name, "copy-on-write") for name in MODE_PROPERTIES}

    def set_mode(self, mode: str) -> Outcome:
        """Set ``DELETE``, ``UPDATE`` and ``MERGE`` to one mode (``ALTER TABLE ... SET TBLPROPERTIES``).

        Raises:
            ConfigError: For a mode other than :data:`ROW_LEVEL_MODES`.
        """
        if mode not in ROW_LEVEL_MODES:
            raise ConfigError(f"row-level mode {mode!r}: choose {' or '.join(ROW_LEVEL_MODES)}.")
        pairs = ", ".join(f"'{name}' = '{mode}'" for name in MODE_PROPERTIES)  # both from fixed sets
        return self._table.apply(Statement(f"ALTER TABLE {self._table.name} SET TBLPROPERTIES ({pairs})", writes=True))

    def delete(self, where: str, args: Mapping[str, Any] | None = None) -> Outcome:
        """``DELETE FROM table WHERE <where>`` (values as ``:name`` markers in ``args``)."""
        return self._table.apply(Statement(f"DELETE FROM {self._table.name} WHERE {where}", dict(args or {}), True))

    def update(self, assignments: str, where: str, args: Mapping[str, Any] | None = None) -> Outcome:
        """``UPDATE table SET <assignments> WHERE <where>``."""
        statement = Statement(f"UPDATE {self._table.name} SET {assignments} WHERE {where}", dict(args or {}), True)
        return self._table.apply(statement)

    def merge(self, source: str, on: str, clauses: str, properties: Mapping[str, str] | None = None) -> Outcome:
        """``MERGE INTO table t USING <source> s ON <on> <clauses>``, optionally with snapshot properties.

        Args:
            source: A table or temporary view name (a checked identifier path).
            on: The join condition, over ``t`` and ``s``.
            clauses: ``WHEN MATCHED ... WHEN NOT MATCHED ...``.
            properties: Snapshot-summary properties of the MERGE's commit (:func:`with_commit_properties`).
        """
        statement = Statement(f"MERGE INTO {self._table.name} t USING {source} s ON {on}\n{clauses}", writes=True)
        if not properties:
            return self._table.apply(statement)
        return with_commit_properties(self._table.spark, properties, lambda: self._table.apply(statement))

    def changelog(self, start_snapshot_id: int, end_snapshot_id: int, key: tuple[str, ...]) -> pd.DataFrame:
        """The rows changed between two snapshots: ``create_changelog_view`` read back, oldest change first.

        Iceberg pairs a deleted and an inserted row of the same key in one commit into ``UPDATE_BEFORE``
        and ``UPDATE_AFTER`` (``compute_updates``). Its changelog scan reads data files only: a table
        with delete files (merge-on-read) fails it, so compare a copy-on-write table, or compact first.

        Args:
            start_snapshot_id: The snapshot before the changes (exclusive).
            end_snapshot_id: The last snapshot of the changes (inclusive).
            key: The key columns that pair a delete with an insert.

        Returns:
            The view's rows: the table's columns, ``_change_type``, ``_change_ordinal``, ``_commit_snapshot_id``.
        """
        view = f"{self._table.identifier.replace('.', '_')}_changes"
        keys = ", ".join(f"'{validate_identifier(column, 'key column')}'" for column in key)
        span = f"'start-snapshot-id', '{int(start_snapshot_id)}', 'end-snapshot-id', '{int(end_snapshot_id)}'"
        self._table.apply(
            self._table.procedure(
                "create_changelog_view",
                options=f"map({span})",
                changelog_view=f"'{validate_identifier(view, 'view')}'",
                compute_updates="true",
                identifier_columns=f"array({keys})",
            )
        )
        order = ", ".join(("_change_ordinal", *key, "_change_type"))
        return self._table.run(Statement(f"SELECT * FROM {view} ORDER BY {order}")).toPandas()

    def last_commit(self) -> dict[str, int | str]:
        """What the table's newest commit wrote and removed, from its snapshot summary.

        Returns:
            ``operation``; as integers (0 when absent) the summary's :data:`COMMIT_COUNTS`; and
            :data:`POSITION_DELETES`, the rows this commit deleted by position (not the earlier ones
            its delete files carried over).
        """
        fields = ", ".join(f"summary['{key}'] AS `{key}`" for key in COMMIT_COUNTS)
        newest = "ORDER BY committed_at DESC LIMIT 1"
        statement = Statement(f"SELECT operation, {fields} FROM {self._table.name}.snapshots {newest}")
        row = first_row(self._table.run(statement))
        counts = {key: int(row[key] or 0) for key in COMMIT_COUNTS}
        return {"operation": row.operation, **counts, POSITION_DELETES: own_position_deletes(counts)}


def own_position_deletes(summary: Mapping[str, Any]) -> int:
    """The rows one commit deleted by position, from its snapshot summary (see :data:`POSITION_DELETES`).

    Args:
        summary: The snapshot's summary (string or integer values; absent keys count 0).

    Returns:
        ``added-position-deletes`` minus ``removed-position-deletes`` (for a row-level commit; a
        compaction, which applies delete files and deletes no row, gives minus what it applied).
    """
    return int(summary.get("added-position-deletes") or 0) - int(summary.get("removed-position-deletes") or 0)
