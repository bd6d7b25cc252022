"""A SQL statement as a value: its text and bound arguments, run and recorded by a table.

See the package docstring (:mod:`icestream.lake`) for how statements are recorded and dry-run.
"""

from __future__ import annotations

import contextlib
import re
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from icestream.errors import ConfigError
from icestream.timestamps import from_micros

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession


def _shown(value: Any) -> str:
    """A bound value as a reader would write it: an aware datetime as a ``TIMESTAMP`` literal."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return timestamp_literal(value)
    return repr(value)


# Whether statements print as they run (show_statements); off for scripts, jobs and tests.
_SHOWN = {"as_they_run": False}


def show_statements(enabled: bool = True) -> None:
    """Print every statement that reads or changes a table as it runs, from now on in this process.

    The workbook's notebooks call this once, so each cell shows the SQL (or the exact DataFrame
    call, or the DuckDB statement, or the pyiceberg scan) it ran, in the order it ran, without a
    print per call. A table made with ``echo=False`` (the live dashboard's, which asks every
    second) stays quiet.

    Args:
        enabled: False turns it off again.
    """
    _SHOWN["as_they_run"] = enabled


@contextlib.contextmanager
def statements_hidden() -> Iterator[None]:
    """Statements run inside print nothing, whatever :func:`show_statements` says: a demo's set-up
    (dropping and making its tables again) is plumbing, not the lesson, and 00 teaches the DDL."""
    before = _SHOWN["as_they_run"]
    _SHOWN["as_they_run"] = False
    try:
        yield
    finally:
        _SHOWN["as_they_run"] = before


def statements_shown() -> bool:
    """Whether :func:`show_statements` is on."""
    return _SHOWN["as_they_run"]


def show(statement: object, *, echo: bool | None = None) -> None:
    """Print a statement that runs now (or is planned, in a dry run) if statements are shown.

    Args:
        statement: A :class:`Statement`, :class:`DataFrameCall` or another engine's query object;
            its ``str`` is what a reader would run.
        echo: The caller's own choice; None follows :func:`show_statements`.
    """
    if statements_shown() if echo is None else echo:
        print(statement, end="\n\n")


@dataclass(frozen=True)
class Statement:
    """One SQL statement: text with ``:name`` markers, and the values bound to them.

    Attributes:
        sql: The statement (indentation removed). Names in it were validated; values that SQL can
            bind are ``:name`` markers, never text.
        args: Values bound to the markers.
        writes: True if it changes a table (DDL, DML, a procedure): a dry run records it without
            running it.
        marker: How the engine writes a parameter marker (``:`` for Spark, ``$`` for DuckDB), so
            the bound values read as the engine's own.
    """

    sql: str
    args: Mapping[str, Any] = field(default_factory=dict)
    writes: bool = False
    marker: str = ":"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sql", textwrap.dedent(self.sql).strip())

    def run(self, spark: SparkSession) -> DataFrame:
        """Run the statement in ``spark`` and return its result."""
        return spark.sql(self.sql, args=dict(self.args) if self.args else None)

    def __str__(self) -> str:
        """The text a reader would run: the SQL, then the bound values as a comment.

        A value the SQL turns into a time from an epoch number (``timestamp_micros(:start)``,
        ``timestamp_seconds(:since)``, DuckDB's ``make_timestamptz($start::BIGINT)`` and
        ``to_timestamp($since)``) is followed by the UTC time it stands for.
        """
        if not self.args:
            return self.sql
        bound = ", ".join(f"{self.marker}{name} = {self._readable(name, value)}" for name, value in self.args.items())
        return f"{self.sql}\n-- bound: {bound}"

    def _readable(self, name: str, value: Any) -> str:
        marker = re.escape(f"{self.marker}{name}")
        as_time = rf"(?:timestamp_micros|make_timestamptz|make_timestamp)\(\s*{marker}\b"
        as_seconds = rf"(?:timestamp_seconds|to_timestamp)\(\s*{marker}\b"
        if isinstance(value, int) and not isinstance(value, bool) and re.search(as_time, self.sql):
            return f"{value} ({from_micros(value):%Y-%m-%d %H:%M:%S.%f} UTC)"
        if isinstance(value, int) and not isinstance(value, bool) and re.search(as_seconds, self.sql):
            return f"{value} ({from_micros(value * 1_000_000):%Y-%m-%d %H:%M:%S} UTC)"
        return _shown(value)


@dataclass(frozen=True)
class DataFrameCall:
    """A table read or write through Spark's DataFrame API, for which Spark SQL has no statement.

    Recorded beside the statements (:meth:`icestream.lake.LakeTable.record`), so a reader sees the
    exact call: e.g. an incremental read, whose ``start-snapshot-id`` option SQL cannot pass.

    Attributes:
        code: The call as Python, with the values it used.
        writes: True if it changes a table.
    """

    code: str
    writes: bool = False

    def __str__(self) -> str:
        return self.code


@dataclass(frozen=True)
class Outcome:
    """What a statement that changes a table did, or would do in a dry run.

    Attributes:
        statement: The statement that ran (or would run).
        output: Its result rows, or None when it did not run (dry run).
    """

    statement: Statement
    output: pd.DataFrame | None

    @property
    def ran(self) -> bool:
        """Whether the statement ran (False in a dry run)."""
        return self.output is not None

    @property
    def counts(self) -> dict[str, int]:
        """The numeric columns of the first output row as integers (a procedure's counts); empty if it did not run."""
        if self.output is None or self.output.empty:
            return {}
        numeric = [column for column in self.output.columns if self.output[column].dtype.kind in "iub"]
        return {column: int(self.output[column].iloc[0]) for column in numeric}

    def values(self, column: str) -> list[Any]:
        """One output column as a list (empty if it did not run or has no such column)."""
        if self.output is None or column not in self.output:
            return []
        return list(self.output[column])


def snapshot_id_literal(snapshot_id: Any) -> int:
    """Check that a snapshot id is an integer (``VERSION AS OF`` cannot bind it, so it is text).

    Raises:
        ConfigError: If ``snapshot_id`` is not an integer.
    """
    if isinstance(snapshot_id, bool) or not isinstance(snapshot_id, int):
        try:
            return int(str(snapshot_id), 10)
        except ValueError:
            raise ConfigError(f"snapshot id {snapshot_id!r} is not an integer.") from None
    return snapshot_id


def timestamp_literal(moment: datetime) -> str:
    """A Spark SQL ``TIMESTAMP`` literal in UTC (procedure arguments must be literals).

    Raises:
        ConfigError: If ``moment`` is naive (its time zone would be a guess).
    """
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise ConfigError(f"{moment!r}: give a timezone-aware datetime, e.g. datetime.now(UTC).")
    utc = moment.astimezone(UTC)
    # Keep a fraction of a second: truncating it would move "older than now" back up to a second.
    fraction = f".{utc.microsecond:06d}" if utc.microsecond else ""
    # Four year digits always: strftime's %Y wrote '1-01-01' for year 1, which Spark cannot parse.
    return f"TIMESTAMP '{utc.year:04d}-{utc:%m-%d %H:%M:%S}{fraction}+00:00'"
