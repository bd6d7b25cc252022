"""Table evolution: columns added while data keeps arriving, partition specs, renames and widened types.

- :func:`align_columns`: the parser keeps unknown top-level fields of an event in ``properties``; when
  the table gains a column later (``ALTER TABLE ... ADD COLUMN coupon``), every writer fills it from
  ``properties['coupon']`` cast to the column's type (null when absent or not castable), so a new
  optional field becomes a column with one DDL statement and no code change. The streaming ingest and
  :meth:`icestream.lake.versions.Versions.append_window` both apply it.
- :class:`Evolution` (``Evolution(table)`` on a :class:`~icestream.lake.table.LakeTable`): the DDL a
  person runs by hand, each a recorded :class:`~icestream.lake.statement.Statement`: ``ADD PARTITION FIELD`` (a new
  ``spec_id``; files already written keep theirs), ``RENAME COLUMN`` and ``ALTER COLUMN ... TYPE``
  within Iceberg's promotions (int → bigint, float → double, a wider decimal), plus the reads that
  show them: files per spec, and the files a query's scan kept and skipped (Iceberg's scan metrics in
  Spark's executed plan). Notebook 04 runs them on its copy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from icestream.errors import ConfigError
from icestream.lake.statement import Outcome, Statement
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructField

    from icestream.lake.table import LakeTable

ADDABLE_TYPES = ("STRING", "INT", "BIGINT", "DOUBLE", "BOOLEAN", "TIMESTAMP")  # for ADD COLUMN
TRANSFORMS = ("identity", "bucket", "truncate", "years", "months", "days", "hours")  # Iceberg's partition transforms
PROMOTIONS = {"INT": "BIGINT", "FLOAT": "DOUBLE"}  # Iceberg's type promotions (decimals: precision only)
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
SCAN_METRICS = ("resultDataFiles", "skippedDataFiles")  # Iceberg's Spark scan metrics: files kept / pruned


def _quoted(name: str) -> str:
    """A column name as Spark SQL text: in backticks, any backtick doubled."""
    return "`" + name.replace("`", "``") + "`"


def _string_literal(text: str) -> str:
    """A Spark SQL string literal (backslash escapes, Spark's default parser mode)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def align_columns(frame: DataFrame, fields: Sequence[StructField], extras_column: str | None = None) -> DataFrame:
    """Select the table's columns, in its order; a column ``frame`` lacks comes from ``properties``.

    Args:
        frame: Rows to write, with at least the base event columns and ``properties``.
        fields: The target table's fields (``spark.table(name).schema.fields``).
        extras_column: A map column of new top-level fields tagged ``<kind>:<text>``
            (:mod:`icestream.ingest.schema_evolution`), read before ``properties`` when ``frame`` has it.

    Returns:
        One ``selectExpr`` (each DataFrame step is analysed again on the driver, so one step, not
        many). SQL text, not ``functions.col`` per column: pyspark resolves ``functions`` through
        py4j's imports for every column, and each of the packages tried before the right one costs
        the JVM a failed class lookup over every jar (a tenth of the ingest's JVM samples at the
        stream's tip, where this runs every batch).
    """
    present = set(frame.columns)
    tagged = extras_column if extras_column in present else None

    def filled(column: StructField) -> str:
        key, kind = _string_literal(column.name), column.dataType.simpleString()
        # TRY_CAST: a value that does not fit is null, as Spark 3.5's CAST made it; Spark 4's ANSI CAST
        # would fail the whole batch on one malformed property.
        value = f"TRY_CAST(properties[{key}] AS {kind})"
        if tagged is not None:
            value = f"coalesce(TRY_CAST(substr({_quoted(tagged)}[{key}], 3, {1 << 30}) AS {kind}), {value})"
        return f"{value} AS {_quoted(column.name)}"

    return frame.selectExpr(*(_quoted(column.name) if column.name in present else filled(column) for column in fields))


def partition_transform(transform: str, column: str, width: int | None = None) -> str:
    """A partition field as Iceberg's Spark DDL writes it: ``bucket(8, user_id)``, ``days(event_ts)``.

    Args:
        transform: One of :data:`TRANSFORMS`.
        column: The source column.
        width: Buckets for ``bucket``, width for ``truncate`` (required for those two only).

    Raises:
        ConfigError: If the transform is unknown, the column not an identifier, or the width missing.
    """
    if transform not in TRANSFORMS:
        raise ConfigError(f"partition transform {transform!r}: choose one of {', '.join(TRANSFORMS)}.")
    column = validate_identifier(column, "partition column")
    if transform in ("bucket", "truncate"):
        if not isinstance(width, int) or isinstance(width, bool) or width < 1:
            raise ConfigError(f"{transform} needs a positive whole width ({width!r}), e.g. {transform}(8, {column})")
        return f"{transform}({width}, {column})"
    if width is not None:
        raise ConfigError(f"{transform} takes no width (got {width}).")
    return column if transform == "identity" else f"{transform}({column})"


def promoted_type(current: str, target: str) -> str:
    """Check that ``current`` → ``target`` is a type promotion Iceberg allows; return ``target`` as DDL.

    Raises:
        ConfigError: For any other change (narrowing, string to number ...): Iceberg refuses those.
    """
    current, target = current.strip().upper(), target.strip().upper()
    decimals = _DECIMAL.fullmatch(current), _DECIMAL.fullmatch(target)
    if decimals[0] and decimals[1]:
        (precision, scale), (new_precision, new_scale) = decimals[0].groups(), decimals[1].groups()
        if scale == new_scale and int(new_precision) >= int(precision):
            return f"DECIMAL({int(new_precision)}, {int(new_scale)})"
    elif PROMOTIONS.get(current) == target:
        return target
    allowed = ", ".join(f"{a} → {b}" for a, b in PROMOTIONS.items())
    raise ConfigError(f"{current} → {target} is not a promotion Iceberg allows ({allowed}, a wider DECIMAL precision).")


class Evolution:
    """Partition and schema changes made by hand on one table, each statement recorded by the table.

    Args:
        table: The table (:class:`~icestream.lake.table.LakeTable`).
    """

    def __init__(self, table: LakeTable) -> None:
        self._table = table

    def add_partition_field(self, transform: str, column: str, width: int | None = None) -> Outcome:
        """``ALTER TABLE ... ADD PARTITION FIELD``: a new spec for new writes; written files keep theirs."""
        field = partition_transform(transform, column, width)
        return self._table.apply(Statement(f"ALTER TABLE {self._table.name} ADD PARTITION FIELD {field}", writes=True))

    def rename_column(self, column: str, new_name: str) -> Outcome:
        """``ALTER TABLE ... RENAME COLUMN``: metadata only; Iceberg tracks columns by id, so old files read on."""
        old, new = validate_identifier(column, "column"), validate_identifier(new_name, "new column name")
        return self._table.apply(Statement(f"ALTER TABLE {self._table.name} RENAME COLUMN {old} TO {new}", writes=True))

    def widen_column(self, column: str, target: str) -> Outcome:
        """``ALTER TABLE ... ALTER COLUMN ... TYPE``, within Iceberg's promotions (:func:`promoted_type`).

        Raises:
            ConfigError: If the column is absent or the change is not a promotion.
        """
        column = validate_identifier(column, "column")
        fields = {field.name: field for field in self._table.spark.table(self._table.name).schema.fields}
        if column not in fields:
            raise ConfigError(f"column {column!r} is not in {self._table.name}; it has {', '.join(fields)}.")
        new_type = promoted_type(fields[column].dataType.simpleString(), target)
        return self._table.apply(
            Statement(f"ALTER TABLE {self._table.name} ALTER COLUMN {column} TYPE {new_type}", writes=True)
        )

    def specs(self) -> pd.DataFrame:
        """Data files and rows per partition spec in the current snapshot (the ``files`` metadata table)."""
        statement = Statement(
            f"SELECT spec_id, count(*) AS data_files, sum(record_count) AS rows FROM {self._table.name}.files "
            "WHERE content = 0 GROUP BY spec_id ORDER BY spec_id"
        )
        return self._table.run(statement).toPandas().astype("int64")

    def scanned_files(self, statement: Statement) -> dict[str, int]:
        """Run a read and return the data files its Iceberg scans kept and skipped (summed over scans).

        Iceberg reports its planning to Spark as scan metrics (``resultDataFiles``, ``skippedDataFiles``),
        so this is the planner's own pruning, not a recount from metadata.

        Returns:
            ``rows`` (rows the read returned), ``data files read``, ``data files skipped``.
        """
        frame = self._table.run(statement)
        rows = len(frame.collect())
        plan = frame._jdf.queryExecution().executedPlan()
        if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
            plan = plan.executedPlan()  # the final plan, once the read ran
        totals = dict.fromkeys(SCAN_METRICS, 0)
        nodes = plan.collectLeaves()
        for index in range(nodes.size()):
            metrics = nodes.apply(index).metrics()
            for name in SCAN_METRICS:
                if metrics.contains(name):
                    totals[name] += int(metrics.apply(name).value())
        return {
            "rows": rows,
            "data files read": totals["resultDataFiles"],
            "data files skipped": totals["skippedDataFiles"],
        }
