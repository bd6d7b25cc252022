"""Schema evolution of payloads (opt-in): new top-level fields become columns, committed with their batch.

``schema_evolution`` (``icestream ingest --schema-evolution``) is one of :data:`MODES`:

- ``off`` (the default): a table's columns change only by DDL. An unknown top-level field is kept
  in ``properties`` as text (:mod:`icestream.ingest.parse`), and a column someone adds later is
  filled from ``properties`` (:func:`icestream.lake.table_evolution.align_columns`).
- ``add-columns``: an unknown top-level field whose name is a lower-case identifier and whose value
  is a string, a number or a boolean becomes a nullable column of the table its event goes to.
- ``add-and-widen``: as ``add-columns``, and an ``int`` column widens to ``bigint``, a ``float`` to
  ``double``, when a batch brings values only the wider type holds (Iceberg's promotions).

**How a field's type is chosen.** The read task tags each such value with its JSON kind
(:func:`tag_value`): ``s`` string, ``b`` boolean, ``i`` an integer within 32 bits, ``l`` within
64 bits, ``f`` a fraction a 32-bit float holds exactly, ``d`` any other finite number, ``x`` a
number no column type holds (beyond 64 bits, or not finite). A field that is not a column yet gets,
over the batch's new records that have it (:func:`infer_type`): the kind group with the most values
(strings, numbers, booleans; a tie goes to strings, then numbers); a number group is ``double`` if
any value has a fraction, else ``bigint``. A null is an absent field and votes for nothing; objects,
arrays, names that are not lower-case identifiers and the table's own column names stay in
``properties`` as text, as with ``off``.

**What a record's field may hold** is fixed by its column's type (:data:`ALLOWED_KINDS`): a string
column strings, ``bigint`` integers, ``double`` any finite number, and so on. A record with a value
its column cannot hold (a string where the column is ``bigint``, a fraction in an ``int`` column
without widening, anything in a struct column) goes to the rejects table with reason
:data:`CONFLICT` and a detail naming the field, its kind and the column's type; the batch and the
query go on.

**Committed with its batch.** The column adds (one ``ALTER TABLE ... ADD COLUMNS``) and widenings
run just before the table's data commit of the batch that first brings the field, and that commit's
snapshot names them (:data:`ADDED_KEY`). Iceberg commits a schema change as metadata of its own
(Spark's writer cannot carry one in an append, and its ``merge-schema`` write option commits the
schema first too), so the order is what makes it safe: no row is ever committed before its column
exists; a crash between the two leaves a nullable column that no row fills yet, and the restart,
which re-reads the batch from the table's committed positions, fills it from the same records.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from icestream.lake.schema import table_columns, try_cast
from icestream.limits import SCHEMA_EVOLUTION_MODES

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructField

    from icestream.ingest.reading.read_stats import ReadStats

Kinds = dict[str, dict[str, int]]  # per new field: values of each kind
Frames = dict[str, tuple["DataFrame", "int | None"]]  # per table: its rows and how many (None: unknown)

MODES = SCHEMA_EVOLUTION_MODES
EXTRAS_COLUMN = "extras"  # the read rows' new top-level fields: name -> "<kind>:<value as text>"
CONFLICT = "schema_conflict"  # the reject reason of a value its column cannot hold
ADDED_KEY = "icestream.added-columns"  # snapshot summary: "name type,..." the batch's schema changes
KIND_NAMES = {
    "s": "a string",
    "b": "a boolean",
    "i": "an integer",
    "l": "a 64-bit integer",
    "f": "a number with a fraction",
    "d": "a number with a fraction",
    "x": "a number no column type holds",
}
# What a column of each type accepts (the type's name before any parenthesis, Spark's simpleString).
ALLOWED_KINDS = {
    "string": "s",
    "boolean": "b",
    "int": "i",
    "bigint": "il",
    "float": "if",
    "double": "ilfd",
    "decimal": "ilfd",
    "date": "s",
    "timestamp": "s",
    "timestamp_ntz": "s",
}
# Types whose cast from an accepted kind can still fail (a decimal's precision, a date's text): a
# value whose cast is null is a conflict too.
CHECKED_CASTS = frozenset(("decimal", "date", "timestamp", "timestamp_ntz"))
PROMOTIONS = {"int": "bigint", "float": "double"}  # Iceberg's type promotions that add-and-widen applies
_FIELD_NAME = re.compile(r"[a-z_][a-z0-9_]{0,127}")
_RESERVED = frozenset(table_columns())
_INT32 = 2**31
_INT64 = 2**63


def evolvable_field(name: str) -> bool:
    """Whether a top-level field of this name may become a column (a lower-case identifier, not a table column)."""
    return _FIELD_NAME.fullmatch(name) is not None and name not in _RESERVED


def tag_value(value: object) -> str | None:
    """``<kind>:<text>`` for a JSON string, number or boolean (see the module docstring); None for anything else."""
    if isinstance(value, bool):
        return "b:true" if value else "b:false"
    if isinstance(value, str):
        return "s:" + value
    if isinstance(value, int):
        if -_INT32 <= value < _INT32:
            return f"i:{value}"
        return f"l:{value}" if -_INT64 <= value < _INT64 else f"x:{str(value)[:40]}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"x:{value}"
        try:
            single = struct.unpack("f", struct.pack("f", value))[0]
        except OverflowError:
            single = None
        return f"f:{value!r}" if single == value else f"d:{value!r}"
    return None


def base_type(type_name: str) -> str:
    """``decimal(10,2)`` -> ``decimal``: the key of :data:`ALLOWED_KINDS`."""
    return type_name.split("(", 1)[0].strip().lower()


def allowed(type_name: str | None) -> str:
    """The kinds a column of ``type_name`` accepts (none for a type the stream cannot fill, or no column)."""
    return ALLOWED_KINDS.get(base_type(type_name), "") if type_name else ""


def infer_type(kinds: Mapping[str, int]) -> str | None:
    """The type of a new column from its values' kinds in a batch (None: no kind a column holds)."""
    groups = {
        "string": kinds.get("s", 0),
        "number": sum(kinds.get(kind, 0) for kind in "ilfd"),
        "boolean": kinds.get("b", 0),
    }
    best = max(groups.values())
    if best == 0:
        return None
    group = next(name for name, count in groups.items() if count == best)  # dict order: the tie-break
    if group == "number":
        return "double" if kinds.get("f", 0) or kinds.get("d", 0) else "bigint"
    return group


@dataclass
class TablePlan:
    """What one table does about the new fields of one batch."""

    add: dict[str, str] = field(default_factory=dict)  # new column -> type
    widen: dict[str, str] = field(default_factory=dict)  # column -> its wider type
    types: dict[str, str | None] = field(default_factory=dict)  # every field seen -> its column's type after
    conflicts_possible: bool = False  # some value may not fit: the batch needs the reject split

    @property
    def changes(self) -> bool:
        """Whether the table's schema changes."""
        return bool(self.add or self.widen)

    def summary(self) -> str:
        """The snapshot summary value of :data:`ADDED_KEY`: ``name type`` per change, sorted."""
        return ",".join(f"{name} {kind}" for name, kind in sorted({**self.add, **self.widen}.items()))


def plan_table(columns: Mapping[str, str], kinds: Mapping[str, Mapping[str, int]], mode: str) -> TablePlan:
    """Decide a table's column adds, widenings and whether rejects are possible, for a batch.

    Args:
        columns: The table's columns: name -> Spark type (``simpleString``).
        kinds: Per new field of the batch's records bound for the table, how many values of each kind.
        mode: One of :data:`MODES` but ``off``.

    Returns:
        The plan (see :class:`TablePlan`).
    """
    plan = TablePlan()
    for name in sorted(kinds):
        seen = {kind for kind, count in kinds[name].items() if count}
        type_name = columns.get(name)
        if type_name is None:
            type_name = infer_type(kinds[name])
            if type_name is not None:
                plan.add[name] = type_name
        elif seen - set(allowed(type_name)) and mode == "add-and-widen":
            wider = PROMOTIONS.get(base_type(type_name))
            if wider is not None and len(seen - set(allowed(wider))) < len(seen - set(allowed(type_name))):
                plan.widen[name] = type_name = wider
        plan.types[name] = type_name
        if seen - set(allowed(type_name)) or (type_name is not None and base_type(type_name) in CHECKED_CASTS):
            plan.conflicts_possible = True
    return plan


def field_value(name: str) -> Column:
    """A new field's value as text (without its kind), null when the record does not have it."""
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    return F.col(EXTRAS_COLUMN)[name].substr(3, 1 << 30)


def conflict_detail(types: Mapping[str, str | None]) -> Column:
    """Per row, why its first field that its column cannot hold does not fit (null: every field fits)."""
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    names = F.create_map(*[F.lit(part) for item in sorted(KIND_NAMES.items()) for part in item])
    reasons = []
    for name in sorted(types):
        type_name = types[name]
        tagged = F.col(EXTRAS_COLUMN)[name]
        kind = tagged.substr(1, 1)
        if type_name is None:
            bad = tagged.isNotNull()
            where = "no column type holds it"
        else:
            bad = tagged.isNotNull() & ~kind.isin(list(allowed(type_name)))
            if base_type(type_name) in CHECKED_CASTS:
                bad = bad | (tagged.isNotNull() & try_cast(field_value(name), type_name).isNull())
            where = f"column {name} is {type_name}"
        reasons.append(F.when(bad, F.concat(F.lit(f"field {name}: "), names[kind], F.lit(f" where {where}"))))
    return F.coalesce(*reasons) if reasons else F.lit(None).cast("string")


def conflict_rejects(frame: DataFrame, detail: Column, batch_id: int | None) -> DataFrame:
    """The rows of ``frame`` with a non-null ``detail``, as rows of the rejects table (their payload as sent)."""
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    from icestream.ingest.transform import REJECT_COLUMNS

    # A transform that dropped the payload's bytes leaves the row itself, as JSON (as its own rejects are).
    raw = F.col("raw_data") if "raw_data" in frame.columns else F.encode(F.to_json(F.struct(*table_columns())), "UTF-8")
    return (
        frame.where(detail.isNotNull())
        .select(
            raw.alias("raw_data"),
            F.substring(F.decode(raw, "UTF-8"), 1, 4096).alias("raw_text"),
            F.lit(CONFLICT).alias("reason"),
            detail.alias("detail"),
            F.lit(batch_id).cast("bigint").alias("batch_id"),
            "shard_id",
            "sequence_number",
            "partition_key",
            "arrival_ts",
            "ingest_ts",
        )
        .select(*REJECT_COLUMNS)
    )


def union(first: DataFrame | None, second: DataFrame | None) -> DataFrame | None:
    """Both frames' rows (None stands for no rows)."""
    if first is None or second is None:
        return first if second is None else second
    return first.unionByName(second)


def count_routes(
    keyed: DataFrame, target: str, table_name: Callable[[str], str]
) -> tuple[dict[str | None, int], dict[str, Kinds]]:
    """Rows per route key, and per table the kinds of its rows' new fields, in one job.

    Args:
        keyed: The routed rows, with the route key in ``target`` and :data:`EXTRAS_COLUMN`.
        target: The route key's column.
        table_name: The table of a key.
    """
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    # One entry per row ("") and one per new field ("<field> <kind>"), counted per key.
    fields = F.transform(
        F.map_entries(F.col(EXTRAS_COLUMN)),
        lambda entry: F.concat(entry["key"], F.lit(" "), entry["value"].substr(1, 1)),
    )
    entries = F.explode(F.concat(F.array(F.lit("")), F.coalesce(fields, F.array().cast("array<string>"))))
    counts: dict[str | None, int] = {}
    kinds: dict[str, Kinds] = {}
    for key, entry, count in keyed.select(target, entries.alias("entry")).groupBy(target, "entry").count().collect():
        if entry == "":
            counts[key] = int(count)
        elif key is not None:
            name, kind = entry.split(" ")
            kinds.setdefault(table_name(key), {}).setdefault(name, {})[kind] = int(count)
    return counts, kinds


class PayloadEvolution:
    """The sink's part of schema evolution: per batch, each table's schema changes and conflicting rows.

    Args:
        spark: The session.
        mode: One of :data:`MODES` but ``off``.
        table_fields: A table's current Spark columns.
        forget: Drops what ``table_fields`` remembers of a table (after its schema changed).
    """

    def __init__(
        self,
        spark: SparkSession,
        mode: str,
        table_fields: Callable[[str], Sequence[StructField]],
        forget: Callable[[str, object], object],
    ) -> None:
        self.spark = spark
        self.mode = mode
        self.table_fields = table_fields
        self.forget = forget

    def split(
        self, frames: Frames, shards: Sequence[ReadStats], table_kinds: dict[str, Kinds] | None, batch_id: int
    ) -> tuple[Frames, DataFrame | None, dict[str, str]]:
        """Change each table's schema for the batch's new fields, before any commit of the batch, and
        split off the rows with a value their column cannot hold.

        The schema changes first so that a record's verdict never changes: whichever attempt commits
        a batch (a restart may re-read a larger one), it judges every record against a schema that
        only ever gained columns and widened, and the rejects it committed stay rejects.

        Args:
            frames: Per table, its rows (with :data:`EXTRAS_COLUMN` and ``raw_data``) and how many.
            shards: The read tasks' stats (the kinds of the batch's new fields, over all tables).
            table_kinds: Per table, its own rows' kinds (a routed batch); None: the batch's are the table's.
            batch_id: Written to the rejects.

        Returns:
            The frames without the conflicting rows, those rows as rejects (None: none possible), and
            per changed table its changes (:meth:`TablePlan.summary`).
        """
        batch_kinds: Kinds = {}
        for stats in shards:
            for name, counts in stats.extra_kinds.items():
                merged = batch_kinds.setdefault(name, {})
                for kind, count in counts.items():
                    merged[kind] = merged.get(kind, 0) + count
        frames, conflicts = dict(frames), None
        changes: dict[str, str] = {}
        if not batch_kinds:
            return frames, conflicts, changes
        for name in sorted(frames):
            frame, rows = frames[name]
            kinds = batch_kinds if table_kinds is None else table_kinds.get(name, {})
            if not kinds:
                continue
            plan = self.apply(name, kinds)
            if plan.changes:
                changes[name] = plan.summary()
            if plan.conflicts_possible:
                detail = conflict_detail(plan.types)
                conflicts = union(conflicts, conflict_rejects(frame, detail, batch_id))
                frames[name] = (frame.where(detail.isNull()), rows)
        return frames, conflicts, changes

    def apply(self, table: str, kinds: Kinds, attempts: int = 3) -> TablePlan:
        """Plan ``table``'s changes for ``kinds`` against its current schema and run their DDL.

        Another writer may change the schema meanwhile (a column added by hand, a racing ingest): a
        statement that fails is planned again from the schema as it is then.
        """
        from pyspark.errors import AnalysisException

        from icestream.lake.ddl import checked_table_name
        from icestream.validation import validate_identifier

        for attempt in range(attempts):
            if attempt:
                self.forget(table, None)  # a statement failed: read the schema as it is now
            columns = {column.name: column.dataType.simpleString() for column in self.table_fields(table)}
            plan = plan_table(columns, kinds, self.mode)
            # Names are checked identifiers and types come from this module's fixed set: both may stand in the text.
            name_sql = checked_table_name(table)
            added = ", ".join(
                f"{validate_identifier(name, 'field')} {kind.upper()}" for name, kind in sorted(plan.add.items())
            )
            statements = [f"ALTER TABLE {name_sql} ADD COLUMNS ({added})"] if plan.add else []
            statements += [
                f"ALTER TABLE {name_sql} ALTER COLUMN {validate_identifier(name, 'field')} TYPE {kind.upper()}"
                for name, kind in sorted(plan.widen.items())
            ]
            try:
                for statement in statements:
                    self.spark.sql(statement)
            except AnalysisException:
                if attempt == attempts - 1:
                    raise
                continue
            if statements:
                self.forget(table, None)
            return plan
        raise AssertionError("unreachable")
