"""Tables a lesson makes and makes again: marked when they are made, and only marked ones dropped.

A demo (:mod:`icestream.demos`) starts every run afresh by dropping its tables with ``PURGE``, so a
second run reads as the first. Its tables are named from the ``table`` setting
(``<table>_crash_demo``, ``<table>_metrics_demo``, ...), and a table of that name may be somebody
else's: a routed table, another pipeline's, a copy made by hand. Dropping it would lose its rows
and files for good (issue 58). So a demo sets :data:`DEMO_PROPERTY` to its own name on each table
it makes, in the creating commit where it runs the ``CREATE`` itself (:func:`demo_mark`), and marks
a table its ingest made on first sight right after the ingest (:func:`adopt_demo_table`). Before it
drops anything, :func:`drop_demo_tables` checks every table it would drop: if one exists without
the demo's mark, it drops none of them and raises :class:`~icestream.errors.TableOwnershipError`,
which says how to give the demo other names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from icestream.errors import TableOwnershipError
from icestream.lake.ddl import checked_table_name
from icestream.lake.statement import Statement
from icestream.lake.table import LakeTable
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEMO_PROPERTY = "icestream.demo"  # on a demo's table: the demo that made it (its suffix, e.g. crash_demo)
# What a user changes to give a demo other tables: every demo's names follow the table setting.
RENAME = "run the notebook with another table (-p table NAME, or ICESTREAM_TABLE) to give the demo other names"


def demo_mark(demo: str) -> dict[str, str]:
    """The table property that marks a table as made by ``demo``, for its ``CREATE`` statement.

    Args:
        demo: The demo's name (its table suffix, an identifier: it stands in the statement's text).
    """
    return {DEMO_PROPERTY: validate_identifier(demo, "demo")}


def table_demo(spark: SparkSession, name: str) -> str | None:
    """The demo that made the table ``name`` (its :data:`DEMO_PROPERTY`), None when no demo did."""
    table = LakeTable(spark, name, echo=False)
    rows = table.run(Statement(f"SHOW TBLPROPERTIES {table.name}")).collect()
    return next((row.value for row in rows if row.key == DEMO_PROPERTY), None)


def unowned_tables(spark: SparkSession, names: Iterable[str], demo: str) -> list[str]:
    """Those of ``names`` that exist and were not made by ``demo``: the tables it must never drop."""
    return [
        name
        for name in map(checked_table_name, names)
        if spark.catalog.tableExists(name) and table_demo(spark, name) != demo
    ]


def drop_demo_tables(spark: SparkSession, names: Iterable[str], demo: str, rename: str = RENAME) -> None:
    """Drop (with ``PURGE``) those of ``names`` that exist, after checking that ``demo`` made each one.

    Every table is checked before any is dropped, so a collision leaves all of them as they were.

    Args:
        spark: The session.
        names: The demo's qualified table names.
        demo: The demo's name, as its tables' :data:`DEMO_PROPERTY` has it.
        rename: How a user gives the demo other names, for the error.

    Raises:
        TableOwnershipError: If a table of one of the names exists without the demo's mark.
    """
    names = [checked_table_name(name) for name in names]
    unowned = unowned_tables(spark, names, demo)
    if unowned:
        raise TableOwnershipError(
            f"{unowned[0]} exists but was not made by the {demo} demo (no {DEMO_PROPERTY} = '{demo}' property), "
            f"so the demo leaves it as it is and stops: {rename}, or rename that table if it is yours."
        )
    for name in names:
        table = LakeTable(spark, name)
        table.apply(Statement(f"DROP TABLE IF EXISTS {table.name} PURGE", writes=True))


def adopt_demo_table(spark: SparkSession, name: str, demo: str) -> bool:
    """Mark a table the demo's own ingest made on first sight (it cannot be given the mark at creation).

    Only call it for a name :func:`drop_demo_tables` found free when the demo started: the table that
    exists now was made during the demo's run.

    Returns:
        Whether the table exists (and is now marked).
    """
    name = checked_table_name(name)
    if not spark.catalog.tableExists(name):
        return False
    table = LakeTable(spark, name)
    pairs = ", ".join(f"'{key}' = '{value}'" for key, value in demo_mark(demo).items())  # a constant, an identifier
    table.apply(Statement(f"ALTER TABLE {table.name} SET TBLPROPERTIES ({pairs})", writes=True))
    return True
