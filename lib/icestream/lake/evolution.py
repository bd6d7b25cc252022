"""Schema evolution while data keeps arriving: the rule that fills a column added to the table.

The parser keeps unknown top-level fields of an event in ``properties``. When the table gains a
column later (``ALTER TABLE ... ADD COLUMN coupon``), every writer fills it from
``properties['coupon']`` cast to the column's type (null when absent or not castable), so a new
optional field becomes a column with one DDL statement and no code change. The streaming ingest and
:meth:`icestream.lake.versions.Versions.append_window` both apply :func:`align_columns`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructField

ADDABLE_TYPES = ("STRING", "INT", "BIGINT", "DOUBLE", "BOOLEAN", "TIMESTAMP")  # for ADD COLUMN


def align_columns(frame: DataFrame, fields: Sequence[StructField]) -> DataFrame:
    """Select the table's columns, in its order; a column ``frame`` lacks comes from ``properties``.

    Args:
        frame: Rows to write, with at least the base event columns and ``properties``.
        fields: The target table's fields (``spark.table(name).schema.fields``).

    Returns:
        One ``select`` (each DataFrame step is analysed again on the driver, so one step, not many).
    """
    from pyspark.sql import functions as F  # noqa: N812 - the usual alias

    present = set(frame.columns)
    return frame.select(
        *(
            F.col(column.name)
            if column.name in present
            else F.col("properties").getItem(column.name).cast(column.dataType).alias(column.name)
            for column in fields
        )
    )
