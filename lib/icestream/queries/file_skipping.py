"""Which files a filter reads: each data file's min/max bounds held against the filter's values.

A scan skips a file whose ``[lower, upper]`` bound of a column cannot match its filter; the bounds
come from ``table.inspect.file_bounds(column)`` (Iceberg's manifests). A sort rewrite narrows them,
and these functions count what that buys (notebook 09).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from icestream.lake.statement import Statement
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    from icestream.lake.table import LakeTable


def files_overlapping(bounds: pd.DataFrame, low: Any, high: Any) -> pd.Series:
    """Which files a filter ``low <= column <= high`` must read: those whose bounds overlap it.

    A file without bounds (a null lower or upper bound) is always read.

    Args:
        bounds: From ``table.inspect.file_bounds(column)``.
        low: The filter's lowest value.
        high: Its highest (``low`` for an equality filter).

    Returns:
        A boolean Series aligned with ``bounds``.
    """
    unknown = bounds["lower_bound"].isna() | bounds["upper_bound"].isna()
    return unknown | ((bounds["lower_bound"] <= high) & (bounds["upper_bound"] >= low))


def files_read(bounds: pd.DataFrame, low: Any, high: Any) -> dict[str, int]:
    """The files and records a filter ``low <= column <= high`` reads after skipping by bounds.

    Returns:
        ``files read``, ``of files``, ``records read``, ``of records`` (integers).
    """
    read = files_overlapping(bounds, low, high)
    return {
        "files read": int(read.sum()),
        "of files": len(bounds),
        "records read": int(bounds.loc[read, "record_count"].sum()),
        "of records": int(bounds["record_count"].sum()),
    }


def files_read_per_value(bounds: pd.DataFrame, values: Sequence[Any]) -> pd.DataFrame:
    """For each value, what a filter ``column = value`` reads after skipping by bounds (:func:`files_read`).

    Returns:
        Index ``value``; columns ``files read``, ``of files``, ``records read``, ``of records`` (integers).
    """
    rows = [{"value": value} | files_read(bounds, value, value) for value in values]
    return pd.DataFrame(rows, columns=["value", "files read", "of files", "records read", "of records"]).set_index(
        "value"
    )


def distinct_values(table: LakeTable, column: str) -> list[Any]:
    """The distinct values of ``column``, sorted (the statement is recorded on the table).

    Raises:
        ConfigError: If ``column`` is not a plain identifier.
    """
    column = validate_identifier(column, "column")
    rows = table.run(Statement(f"SELECT DISTINCT {column} AS value FROM {table.name} ORDER BY value")).collect()
    return [row.value for row in rows]
