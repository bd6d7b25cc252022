"""Change data: a stream of creates, updates and deletes by key, applied to a keyed table exactly once.

A change ingest (``changes`` settings, ``icestream ingest --changes``) reads a stream whose records
are changes of one kind of entity, not events. Each record is checked in the read task against
the table's declaration (:class:`~icestream.lake.keyed.KeyedSpec`) by :func:`parse_change`, in one
of two shapes:

- ``flat``: the row's columns at the top level and an operation field (``op`` unless
  ``changes_op_field`` says otherwise): ``{"op": "u", "order_id": 7, "status": "paid", ...}``;
- ``debezium``: Debezium's envelope ``{"before": {...}, "after": {...}, "op": "u", "ts_ms": ...}``,
  also wrapped in ``{"schema": ..., "payload": {...}}`` as its JSON converter writes it with schemas
  on. The row is ``after``, or ``before`` for a delete; a declared column the row lacks is taken
  from the envelope's field of the same name when there is one (``ts_ms`` as an ordering column).

Operations: ``c``/``create``/``insert``, ``r``/``read``/``snapshot``, ``u``/``update``/``upsert``
are upserts; ``d``/``delete`` deletes (any case). Fields the declaration does not name are ignored;
a wrong type, a missing key or ordering value, an unknown operation go to the rejects table with
their reason, as bad events do.

Each batch then folds its changes per key by the order rule (:mod:`icestream.lake.keyed`): one
change per key survives, the newest. :func:`apply_changes` applies them with **one** ``MERGE INTO``
whose condition is the same rule, and whose commit carries the table's Kinesis positions in its
snapshot summary (:func:`~icestream.lake.rowlevel.with_commit_properties`): the table's rows and
its position change in the same commit, so a crash anywhere is recovered exactly once, and a
change read twice (a replay, a resend) cannot undo a newer one.

A MERGE that loses a race with compaction or another writer fails Iceberg's validation (the
tables keep the default ``serializable`` isolation, under which a concurrent change to the rows a
MERGE read fails it); the ingest retries the batch from the committed positions
(:mod:`icestream.ingest.batch_retry`).
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from icestream.errors import ConfigError
from icestream.ingest.parse import Rejection, decode_object, parse_timestamp
from icestream.lake.keyed import COLUMN_TYPES, DELETED_COLUMN, KeyedSpec, merge_statement
from icestream.lake.rowlevel import with_commit_properties
from icestream.lake.schema import try_cast

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from icestream.config import Settings

SHAPES = ("flat", "debezium")
UPSERT, DELETE = "upsert", "delete"
OPERATIONS = {
    **dict.fromkeys(("c", "create", "insert", "r", "read", "snapshot", "u", "update", "upsert"), UPSERT),
    **dict.fromkeys(("d", "delete"), DELETE),
}
CHANGE_REJECT_REASONS = (
    "missing_op",
    "unknown_op",
    "missing_row",
    "missing_key",
    "missing_order",
    "wrong_type",
    "bad_timestamp",
    "bad_date",
    "out_of_range",
)
_INT_LIMITS = {"int": 2**31, "bigint": 2**63}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ChangeSpec:
    """What a change stream looks like and the table it keeps: shipped to read tasks (plain values only)."""

    keyed: KeyedSpec
    shape: str = "flat"
    op_field: str = "op"  # flat shape: the field naming the operation

    @classmethod
    def parse(
        cls, columns: str, key: str, order: str | None = None, shape: str = "flat", op_field: str = "op"
    ) -> ChangeSpec:
        """Check and build a change stream's description (see the module docstring).

        Raises:
            ConfigError: For a bad declaration, shape or operation field.
        """
        if shape not in SHAPES:
            raise ConfigError(f"changes format {shape!r}: choose {' or '.join(SHAPES)}.")
        keyed = KeyedSpec.parse(columns, key, order)
        if op_field in keyed.types:
            raise ConfigError(f"changes op field {op_field!r} is also a declared column; name another field.")
        return cls(keyed, shape, op_field or "op")


def change_spec_from_settings(settings: Settings) -> ChangeSpec | None:
    """The change stream the settings declare (``changes_columns``, ``changes_key``, ...), or None."""
    if not settings.changes_columns:
        if settings.changes_key:
            raise ConfigError("changes_key needs changes_columns: declare the table's columns too.")
        return None
    return ChangeSpec.parse(
        settings.changes_columns,
        settings.changes_key or "",
        settings.changes_order,
        settings.changes_format,
        settings.changes_op_field,
    )


def parse_change(data: bytes, spec: ChangeSpec, max_bytes: int, record_id: str) -> tuple | Rejection:
    """Check one change record against the declaration: the read task's parse for a change stream.

    Args:
        data: The record's payload.
        spec: The stream's description.
        max_bytes: Larger payloads are rejected as ``oversized``.
        record_id: Unique per record (``<sequence>:<sub>``): the row's ``event_id`` column.

    Returns:
        The reader's event fields ``(record_id, None, None, operation, None, values, None, None, False)``,
        ``values`` each declared column's value as text Spark casts to its type (None for null);
        or a :class:`~icestream.ingest.parse.Rejection`.
    """
    document = decode_object(data, max_bytes)
    if isinstance(document, Rejection):
        return document
    row, op_name = document, spec.op_field
    if spec.shape == "debezium":
        inner = document.get("payload")
        document = inner if isinstance(inner, dict) and "op" in inner else document
        op_name = "op"
    raw_op = document.get(op_name)
    if raw_op is None:
        return Rejection("missing_op", f"{op_name} is missing or null")
    operation = OPERATIONS.get(raw_op.lower()) if isinstance(raw_op, str) else None
    if operation is None:
        return Rejection("unknown_op", f"{op_name} {raw_op!r}: expected c, r, u or d (or create, update, delete)")
    if spec.shape == "debezium":
        side_row = document.get("before" if operation == DELETE else "after")
        if not isinstance(side_row, dict):
            side = "before" if operation == DELETE else "after"
            return Rejection("missing_row", f"{side} is not an object in a Debezium {raw_op!r} change")
        row = {**{k: v for k, v in document.items() if k not in ("before", "after", "op")}, **side_row}
    keyed = spec.keyed
    values: dict[str, str | None] = {}
    for name, kind in keyed.columns:
        value = row.get(name)
        if value is None:
            if name in keyed.key or name == keyed.order:
                reason = "missing_key" if name in keyed.key else "missing_order"
                return Rejection(reason, f"{name} is missing or null")
            values[name] = None
            continue
        text = _as_text(name, kind, value)
        if isinstance(text, Rejection):
            return text
        values[name] = text
    return (record_id, None, None, operation, None, values, None, None, False)


def _as_text(name: str, kind: str, value: Any) -> str | Rejection:
    """``value`` checked against ``kind``, as text that ``CAST(... AS <kind>)`` reads back exactly."""
    if kind == "string":
        return value if isinstance(value, str) else _wrong(name, kind, value)
    if kind in _INT_LIMITS:
        if type(value) is not int:
            return _wrong(name, kind, value)
        limit = _INT_LIMITS[kind]
        return str(value) if -limit <= value < limit else Rejection("out_of_range", f"{name}: {value} is not a {kind}")
    if kind == "double":
        if type(value) not in (int, float) or not math.isfinite(value):
            return _wrong(name, kind, value)
        return repr(float(value))
    if kind == "boolean":
        return ("true" if value else "false") if type(value) is bool else _wrong(name, kind, value)
    if kind == "timestamp":
        moment = _timestamp(value)
        if moment is None:
            return Rejection("bad_timestamp", f"{name}: {value!r} is not ISO-8601 with an offset or epoch ms")
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert kind == "date", kind
    day = _date(value)
    return day.isoformat() if day is not None else Rejection("bad_date", f"{name}: {value!r} is not YYYY-MM-DD")


def _wrong(name: str, kind: str, value: Any) -> Rejection:
    shown = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(type(value), "a number")
    return Rejection("wrong_type", f"{name}: {shown} where a {kind} is declared")


def _timestamp(value: Any) -> datetime | None:
    """An ISO-8601 text with an offset, or epoch milliseconds (Debezium's default for timestamps)."""
    if isinstance(value, str):
        return parse_timestamp(value)
    if type(value) is int:
        try:
            return _EPOCH + timedelta(milliseconds=value)
        except OverflowError:
            return None
    return None


def _date(value: Any) -> date | None:
    """``YYYY-MM-DD``, or days since 1970-01-01 (Debezium's default for dates)."""
    try:
        if isinstance(value, str):
            return date.fromisoformat(value) if len(value) == 10 else None
        if type(value) is int:
            return (_EPOCH + timedelta(days=value)).date()
    except (ValueError, OverflowError):
        return None
    return None


def typed_changes(rows: DataFrame, spec: ChangeSpec) -> DataFrame:
    """The batch's change rows (the reader's event rows) as the table's columns, plus ``ordinal`` for the fold."""
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    declared = [
        try_cast(F.col("properties")[name], COLUMN_TYPES[kind]).alias(name) for name, kind in spec.keyed.columns
    ]
    deleted = (F.col("event_type") == DELETE).alias(DELETED_COLUMN)
    return rows.select(*declared, deleted, "shard_id", "sequence_number", "arrival_ts", "ingest_ts", "ordinal")


def fold(changes: DataFrame, spec: ChangeSpec) -> DataFrame:
    """One change per key, the newest by the order rule (:mod:`icestream.lake.keyed`), without ``ordinal``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    keyed = spec.keyed
    newest = [F.col(keyed.order).desc(), F.col(DELETED_COLUMN).desc()] if keyed.order else []
    # The later arrival: Kinesis arrival time, then stream order within a shard (ordinal: the read task's order).
    later = [F.col("arrival_ts").desc(), F.col("shard_id").desc(), F.col("ordinal").desc()]
    window = Window.partitionBy(*keyed.key).orderBy(*newest, *later)
    rank = "_icestream_rank"
    return changes.withColumn(rank, F.row_number().over(window)).where(F.col(rank) == 1).drop(rank, "ordinal")


def apply_changes(
    spark: SparkSession, table: str, rows: DataFrame, spec: ChangeSpec, properties: dict[str, str]
) -> None:
    """Fold ``rows`` (the reader's event rows of change records) and MERGE them into ``table`` in one commit
    whose snapshot summary carries ``properties`` (the positions)."""
    view = f"icestream_changes_{uuid.uuid4().hex[:12]}"  # per call: queries sharing a session never collide
    fold(typed_changes(rows, spec), spec).createOrReplaceTempView(view)
    try:
        statement = merge_statement(table, view, spec.keyed)
        with_commit_properties(spark, properties, lambda: statement.run(spark))
    finally:
        spark.catalog.dropTempView(view)
