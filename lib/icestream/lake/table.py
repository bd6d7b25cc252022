"""``LakeTable``: one Iceberg table, its name checked once, and every statement run on it recorded."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING

from icestream.config import TIME_TRAVEL_SUFFIX
from icestream.lake.ddl import (
    checked_table_name,
    create_archive_table,
    create_events_table,
    create_namespace,
    create_rejects_table,
)
from icestream.lake.inspect import Inspect
from icestream.lake.layout import table_layout
from icestream.lake.maintenance import Maintenance
from icestream.lake.rowlevel import RowLevel
from icestream.lake.statement import DataFrameCall, Outcome, Statement, show
from icestream.lake.versions import Versions
from icestream.runtime.handles import first_row
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from icestream.config import Settings
    from icestream.lake.layout import TableLayout

STATEMENTS_KEPT = 100  # a long-lived table object (the ingest's) must not grow without bound


class LakeTable:
    """An Iceberg table in the Spark session, in the style of pyiceberg's ``Table``.

    Attributes:
        spark: The session.
        name: The validated qualified name (``catalog.namespace.table``), the only form of the
            name that reaches SQL.
        catalog: The catalog part, which runs the table's procedures (``CALL <catalog>.system...``).
        identifier: The name inside the catalog (``namespace.table``), the procedures' table argument.
        dry_run: Statements that change the table are recorded, not run.
        echo: Print each statement as it is recorded; None follows
            :func:`~icestream.lake.statement.show_statements`.
        statements: The statements run (or, in a dry run, planned) through this object, oldest first.
        inspect: Metadata tables, properties and the snapshot ancestry (:class:`~icestream.lake.inspect.Inspect`).
        maintenance: Iceberg's maintenance procedures (:class:`~icestream.lake.maintenance.Maintenance`).
        versions: Time travel, refs and history-changing writes (:class:`~icestream.lake.versions.Versions`).
        row_level: Copy-on-write or merge-on-read and the DML (:class:`~icestream.lake.rowlevel.RowLevel`).
    """

    def __init__(self, spark: SparkSession, name: str, *, dry_run: bool = False, echo: bool | None = None) -> None:
        """Open a table by name (nothing is read until a method asks).

        Args:
            spark: The session.
            name: ``catalog.namespace.table``.
            dry_run: Record statements that change the table instead of running them.
            echo: Print each statement as it runs (None: as :func:`~icestream.lake.statement.show_statements` says).

        Raises:
            ConfigError: If a part of the name is not a plain identifier.
        """
        self.spark = spark
        self.name = checked_table_name(name)
        self.catalog, self.identifier = self.name.split(".", 1)
        self.dry_run = dry_run
        self.echo = echo
        self.statements: deque[Statement | DataFrameCall] = deque(maxlen=STATEMENTS_KEPT)
        self.inspect = Inspect(self)
        self.maintenance = Maintenance(self)
        self.versions = Versions(self)
        self.row_level = RowLevel(self)

    def __repr__(self) -> str:
        return f"LakeTable({self.name!r}{', dry_run=True' if self.dry_run else ''})"

    @property
    def last_statement(self) -> Statement | DataFrameCall | None:
        """The statement run (or planned) most recently through this object."""
        return self.statements[-1] if self.statements else None

    def _remember(self, statement: Statement | DataFrameCall) -> None:
        self.statements.append(statement)
        show(statement, echo=self.echo)

    def run(self, statement: Statement) -> DataFrame:
        """Record and run a statement that reads (it runs in a dry run too).

        Raises:
            ValueError: If the statement changes the table (use :meth:`apply`).
        """
        if statement.writes:
            raise ValueError("run() is for statements that read; apply() runs those that change the table")
        self._remember(statement)
        return statement.run(self.spark)

    def record(self, call: DataFrameCall) -> None:
        """Record a DataFrame API call made on this table (where no SQL exists), beside the statements."""
        self._remember(call)

    def apply(self, statement: Statement) -> Outcome:
        """Record a statement that changes the table, and run it unless this is a dry run."""
        self._remember(statement)
        if self.dry_run:
            return Outcome(statement, None)
        return Outcome(statement, statement.run(self.spark).toPandas())

    def procedure(self, procedure: str, **arguments: str) -> Statement:
        """``CALL <catalog>.system.<procedure>(table => '<identifier>', name => value, ...)``.

        Args:
            procedure: The Iceberg procedure.
            **arguments: Argument name → SQL literal text; callers validate every value first
                (procedure arguments cannot be bound parameters).
        """
        listed = [f"table => '{self.identifier}'"]
        listed += [f"{validate_identifier(key, 'procedure argument')} => {value}" for key, value in arguments.items()]
        return Statement(
            f"CALL {self.catalog}.system.{validate_identifier(procedure, 'procedure')}({', '.join(listed)})",
            writes=True,
        )

    def branch(self, branch: str) -> str:
        """The name that reads or writes a branch: ``<table>.branch_<branch>``."""
        return f"{self.name}.branch_{validate_identifier(branch, 'branch')}"

    def show_create(self) -> str:
        """The table's DDL as Iceberg reports it (``SHOW CREATE TABLE``)."""
        return str(first_row(self.run(Statement(f"SHOW CREATE TABLE {self.name}")))[0])

    def layout(self, catalog_type: str = "") -> TableLayout:
        """The current snapshot's files, walked from the catalog down (:func:`~icestream.lake.layout.table_layout`).

        Args:
            catalog_type: Shown next to the catalog's name (``jdbc``, ``hadoop``, ``glue``).
        """
        return table_layout(self, catalog_type)


def recreate_events_copy(spark: SparkSession, settings: Settings, suffix: str = TIME_TRAVEL_SUFFIX) -> LakeTable:
    """Drop and create an empty table with the events table's DDL, named ``<table>_<suffix>``.

    Returns:
        The copy.
    """
    copy = settings.companion(suffix)
    table = LakeTable(spark, copy.table_name)
    table.apply(Statement(f"DROP TABLE IF EXISTS {table.name} PURGE", writes=True))
    create_events_table(spark, copy)
    return table


def setup_tables(
    spark: SparkSession, settings: Settings, properties: Mapping[str, str] | None = None
) -> list[LakeTable]:
    """Create the namespace, the events table and the rejects table (idempotent); the raw archive too
    when ``archive_raw`` is on. The one way the workbook's tables are made.

    ``properties`` are set on the tables it creates, in their creating commits (a demo's mark:
    :func:`icestream.lake.demo_tables.demo_mark`); a table that exists keeps its own.

    Each statement runs through its table's LakeTable, so ``table.statements`` shows the set-up as it
    ran: the ``CREATE NAMESPACE`` (on the events table), the ``CREATE TABLE IF NOT EXISTS``, the
    properties read, and an ``ALTER`` only where an older table lacked the project's properties.

    Returns:
        The events table, the rejects table and, when ``archive_raw`` is on, the raw archive.
    """
    tables: dict[str, LakeTable] = {}

    def run(name: str, statement: Statement) -> object:
        table = tables.setdefault(name, LakeTable(spark, name))
        return table.apply(statement) if statement.writes else table.run(statement)

    create_namespace(spark, settings, run)
    names = [
        create_events_table(spark, settings, run, properties),
        create_rejects_table(spark, settings, run, properties),
    ]
    if settings.archive_raw:
        names.append(create_archive_table(spark, settings, run, properties))
    return [tables[name] for name in names]
