"""Keyed tables: one row per key, the latest state of an entity that a change stream describes.

A keyed table is declared, not inferred: its columns (``order_id BIGINT, status STRING, amount
DOUBLE, updated_at TIMESTAMP``), its key (Iceberg *identifier fields*, so other engines know it
too) and, optionally, an *ordering column* that says which of two changes of a key is the newer.
:class:`KeyedSpec` checks a declaration; :func:`create_keyed_table` makes the table (or checks
that an existing one was declared the same way); :func:`merge_statement` is the ``MERGE INTO``
that applies a batch of folded changes (:mod:`icestream.ingest.changes` builds the batch).

**The order rule**, the same in the batch's fold and in the MERGE's condition, so a change's fate
never depends on which batch it arrived in:

1. with an ordering column, the change with the greater value wins;
2. at the same value, a delete wins over an upsert;
3. otherwise the later arrival wins (a replayed change re-applies the values it already wrote).

Without an ordering column only the third applies: the last arrival wins, as in Firehose's and
Flink's upserts, and a change resent late overwrites newer ones.

**Deletes are tombstones.** A delete sets :data:`DELETED_COLUMN` and keeps the key's row, with its
ordering value. A change older than the delete that arrives after it (out of order, or resent)
then loses against the tombstone by rule 1 or 2 instead of bringing the key back. The entity's
current state is therefore the rows ``WHERE NOT is_deleted`` (:data:`LIVE_FILTER`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from icestream.errors import ConfigError
from icestream.lake.ddl import checked_table_name, create_table_statement
from icestream.lake.rowlevel import MODE_PROPERTIES, ROW_LEVEL_MODES
from icestream.lake.statement import Statement
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Declared types and their Spark SQL spelling (the types a change's JSON value is checked against).
COLUMN_TYPES = {
    "string": "STRING",
    "int": "INT",
    "bigint": "BIGINT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "date": "DATE",
}
TYPE_ALIASES = {"long": "bigint", "integer": "int", "bool": "boolean", "float8": "double"}
ORDER_TYPES = ("int", "bigint", "double", "timestamp", "date")
DELETED_COLUMN = "is_deleted"
LIVE_FILTER = f"NOT {DELETED_COLUMN}"
# Where the change that wrote each row came from, as in the events table.
CHANGE_METADATA_DDL = (
    f"{DELETED_COLUMN} BOOLEAN COMMENT 'A tombstone: the key was deleted (kept so older changes cannot revive it)'",
    "shard_id STRING COMMENT 'Kinesis shard of the change that wrote the row'",
    "sequence_number STRING COMMENT 'Its Kinesis sequence number'",
    "arrival_ts TIMESTAMP COMMENT 'Its Kinesis ApproximateArrivalTimestamp'",
    "ingest_ts TIMESTAMP COMMENT 'When the ingest began reading the batch that wrote the row'",
)
RESERVED_COLUMNS = frozenset((DELETED_COLUMN, "shard_id", "sequence_number", "arrival_ts", "ingest_ts"))
SPEC_PROPERTY = "icestream.keyed"  # the declaration, on the table: a restart with another one is refused
DEFAULT_MODE = "merge-on-read"  # a streaming MERGE touches a few rows per batch: cheap writes, compaction later


@dataclass(frozen=True)
class KeyedSpec:
    """A keyed table's declaration: columns with types, the key, the ordering column (see the module docstring)."""

    columns: tuple[tuple[str, str], ...]  # (name, type of COLUMN_TYPES), in table order
    key: tuple[str, ...]
    order: str | None = None

    @classmethod
    def parse(cls, columns: str, key: str | tuple[str, ...], order: str | None = None) -> KeyedSpec:
        """Check and build a declaration.

        Args:
            columns: ``name type`` pairs separated by commas (types: :data:`COLUMN_TYPES`).
            key: The key column(s): a name, names separated by commas, or a tuple.
            order: The ordering column (a number, timestamp or date column that is not the key), or None.

        Raises:
            ConfigError: Naming what is wrong and how to write it.
        """
        pairs: list[tuple[str, str]] = []
        for item in filter(str.strip, (columns or "").split(",")):
            parts = item.split()
            if len(parts) != 2:
                raise ConfigError(f"changes columns: {item.strip()!r} is not 'name type' (e.g. order_id bigint).")
            name, kind = validate_identifier(parts[0].lower(), "changes column"), parts[1].lower()
            kind = TYPE_ALIASES.get(kind, kind)
            if kind not in COLUMN_TYPES:
                raise ConfigError(f"changes column {name}: type {parts[1]!r}; choose {', '.join(COLUMN_TYPES)}.")
            if name in RESERVED_COLUMNS:
                raise ConfigError(f"changes column {name}: the table keeps that name for itself; rename it.")
            if name in dict(pairs):
                raise ConfigError(f"changes column {name} is declared twice.")
            pairs.append((name, kind))
        if not pairs:
            raise ConfigError("changes columns: declare the table's columns, e.g. 'order_id bigint, status string'.")
        keys = tuple(part.strip().lower() for part in (key.split(",") if isinstance(key, str) else key) if part.strip())
        types = dict(pairs)
        if not keys or any(name not in types for name in keys) or len(set(keys)) != len(keys):
            raise ConfigError(f"changes key {key!r}: name one or more declared columns ({', '.join(types)}).")
        if order is not None:
            order = order.strip().lower()
            if types.get(order) not in ORDER_TYPES or order in keys:
                raise ConfigError(
                    f"changes order {order!r}: name a declared {', '.join(ORDER_TYPES)} column that is not the key."
                )
        return cls(tuple(pairs), keys, order)

    @property
    def types(self) -> dict[str, str]:
        """Column name -> declared type."""
        return dict(self.columns)

    def columns_ddl(self) -> tuple[str, ...]:
        """The declared columns as Spark DDL (key columns ``NOT NULL``: Iceberg identifier fields must be)."""
        return tuple(
            f"{name} {COLUMN_TYPES[kind]}{' NOT NULL' if name in self.key else ''}" for name, kind in self.columns
        )

    def to_json(self) -> str:
        """The declaration as the table property :data:`SPEC_PROPERTY` keeps it."""
        return json.dumps(
            {"columns": [list(pair) for pair in self.columns], "key": list(self.key), "order": self.order},
            separators=(",", ":"),
        )


def create_keyed_table(
    spark: SparkSession,
    name: str,
    spec: KeyedSpec,
    comment: str,
    mode: str = DEFAULT_MODE,
    properties: Mapping[str, str] | None = None,
) -> str:
    """Create a keyed table unless it exists (or check an existing one was declared as ``spec``); return its name.

    It is unpartitioned (a MERGE joins on the key, not on time), has the key as identifier fields,
    the row-level ``mode`` for DELETE, UPDATE and MERGE, and the project's properties, with
    ``properties`` (a demo's mark) set in its creating commit.

    Raises:
        ConfigError: For a bad name or mode, or an existing table declared differently.
    """
    name = checked_table_name(name)
    if mode not in ROW_LEVEL_MODES:
        raise ConfigError(f"row-level mode {mode!r}: choose {' or '.join(ROW_LEVEL_MODES)}.")
    if spark.catalog.tableExists(name):
        declared = _properties(spark, name).get(SPEC_PROPERTY)
        if declared != spec.to_json():
            raise ConfigError(
                f"{name} exists with another declaration ({declared or 'none: not a keyed table'}); "
                "declare it the same way or ingest into a new table."
            )
        return name
    statement = create_table_statement(name, spec.columns_ddl() + CHANGE_METADATA_DDL, None, comment, properties)
    statement.run(spark)
    keys = ", ".join(spec.key)  # checked identifiers
    Statement(f"ALTER TABLE {name} SET IDENTIFIER FIELDS {keys}", writes=True).run(spark)
    properties = {**dict.fromkeys(MODE_PROPERTIES, mode), SPEC_PROPERTY: spec.to_json()}
    pairs = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())  # our constants and checked names
    Statement(f"ALTER TABLE {name} SET TBLPROPERTIES ({pairs})", writes=True).run(spark)
    return name


def newer_condition(spec: KeyedSpec, new: str = "s", held: str = "t") -> str:
    """The order rule as a SQL condition: the change ``new`` replaces the row ``held`` (see the module docstring)."""
    if spec.order is None:
        return "TRUE"
    order, deleted = spec.order, DELETED_COLUMN
    return (
        f"{new}.{order} > {held}.{order} OR ({new}.{order} = {held}.{order} "
        f"AND ({new}.{deleted} OR NOT {held}.{deleted}))"
    )


def merge_statement(name: str, source: str, spec: KeyedSpec, columns: tuple[str, ...] | None = None) -> Statement:
    """The ``MERGE INTO`` that applies folded changes (one per key) from the view ``source``.

    Args:
        name: The keyed table.
        source: A view with one change per key.
        spec: The table's declaration (key and ordering column).
        columns: The columns ``source`` sets (None: all of the table's, ``UPDATE SET *`` and ``INSERT *``);
            the others keep their value on an update and are null on an insert.
    """
    name, source = checked_table_name(name), validate_identifier(source, "changes view")
    on = " AND ".join(f"t.{key} = s.{key}" for key in spec.key)
    update, insert = "*", "*"
    if columns is not None:
        names = [validate_identifier(column, "column") for column in columns]
        update = ", ".join(f"t.{column} = s.{column}" for column in names if column not in spec.key)
        insert = f"({', '.join(names)}) VALUES ({', '.join(f's.{column}' for column in names)})"
    return Statement(
        f"MERGE INTO {name} t\nUSING {source} s\nON {on}\n"
        f"WHEN MATCHED AND ({newer_condition(spec)}) THEN UPDATE SET {update}\n"
        f"WHEN NOT MATCHED THEN INSERT {insert}",
        writes=True,
    )


def _properties(spark: SparkSession, name: str) -> dict[str, str]:
    return {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
