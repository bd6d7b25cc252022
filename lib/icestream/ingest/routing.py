"""Routing: each event goes to the table its route names; tables are created the first time they are seen.

A route is a field of the event (``event_type``, or a map key such as ``properties.kind``) or a
function ``DataFrame -> Column`` named ``module:function``, evaluated over the batch's events
after dedupe and the transform; it must be deterministic (a batch re-read after a crash is routed
again). Its value picks the table:

- with a mapping (``route_tables``: ``value=suffix`` pairs) a value goes to ``<table>_<suffix>``;
- without one, a value that is a lower-case identifier goes to ``<table>_<value>``;
- any other value (null, unmapped, not an identifier, or naming a companion the workbook keeps
  for itself such as ``rejects``) is *unknown*: it goes to the default table (``route_default``,
  else the events table itself) or, with ``route_unknown: reject``, to the shared rejects table
  with reason :data:`UNKNOWN_ROUTE` and the route and value in its detail.

Every table name comes from :class:`~icestream.config.Settings` (``companion_table_name``), so a
routed table is always ``<table>_<suffix>`` in the events table's namespace. A routed table is
created on first sight with the events table's declared schema, partitioning and properties
(:func:`icestream.lake.ddl.create_routed_table`), and recorded as fed by this stream (a table
property) and listed on the events table (:data:`ROUTED_PROPERTY`), which is how a restart finds
every routed table again (:func:`routed_tables`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from icestream.config import ARCHIVE_SUFFIX, COPY_SUFFIXES, METRICS_SUFFIX, REJECTS_SUFFIX, Settings
from icestream.errors import ConfigError
from icestream.ingest.transform import DETAIL_COLUMN, REASON_COLUMN, load_function
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

UNKNOWN_ROUTE = "unknown_route"  # the reject reason of an event whose route names no table
UNKNOWN_CHOICES = ("default", "reject")
TARGET_COLUMN = "_icestream_route_table"  # the routed table's key while a batch is split (dropped before writes)
VALUE_COLUMN = "_icestream_route_value"
RESERVED_SUFFIXES = frozenset((REJECTS_SUFFIX, ARCHIVE_SUFFIX, METRICS_SUFFIX, *COPY_SUFFIXES))
# Values that name a table by themselves (no mapping): lower case, so two spellings never make two tables.
VALUE_SUFFIX = r"^[a-z][a-z0-9_]{0,63}$"
EVENTS_KEY = ""  # the key of the events table itself
ROUTED_PROPERTY = "icestream.routed-tables"  # on the events table: suffixes of the tables made on first sight


@dataclass(frozen=True)
class Routing:
    """Where each event goes (see the module docstring): build it with :meth:`parse` or from settings."""

    spec: str  # as given: a field path or module:function
    field_path: tuple[str, ...] = ()  # the field's parts (event_type; properties, kind)
    function: Callable[[DataFrame], Column] | None = None
    tables: Mapping[str, str] = field(default_factory=dict)  # value -> suffix
    default: str | None = None  # suffix of the default table; None: the events table
    unknown: str = "default"

    @classmethod
    def parse(
        cls, spec: str, tables: Iterable[str] | Mapping[str, str] = (), default: str | None = None,
        unknown: str = "default",
    ) -> Routing:  # fmt: skip
        """Check and build a routing.

        Args:
            spec: A field (``event_type``, ``properties.kind``) or ``module:function``.
            tables: ``value=suffix`` pairs (or a mapping value -> suffix).
            default: The default table's suffix (None: the events table).
            unknown: ``default`` or ``reject``.

        Raises:
            ConfigError: Naming what is wrong and how to write it.
        """
        spec = (spec or "").strip()
        if not spec:
            raise ConfigError("route: give a field (event_type) or module:function.")
        function, path = None, ()
        if ":" in spec:
            function = load_function(spec, "--route")
        else:
            path = tuple(spec.split("."))
            if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part) for part in path):
                raise ConfigError(f"route {spec!r}: name a field (event_type, properties.kind) or module:function.")
        if unknown not in UNKNOWN_CHOICES:
            raise ConfigError(f"route_unknown {unknown!r}: choose default or reject.")
        return cls(spec, path, function, _mapping(tables), _suffix(default, "route_default"), unknown)

    def table_name(self, settings: Settings, key: str) -> str:
        """The qualified table of a target key (``""``: the events table; else a suffix)."""
        return settings.table_name if key == EVENTS_KEY else settings.companion_table_name(_suffix(key, "route"))

    def declared(self, settings: Settings) -> list[str]:
        """The tables this routing names before it sees any event: the events table, the default, the mapped."""
        keys = {EVENTS_KEY, self.default or EVENTS_KEY, *self.tables.values()}
        return sorted(self.table_name(settings, key) for key in keys)

    def value(self, events: DataFrame) -> Column:
        """The route's value of each event, as a string (null when the field is missing or null)."""
        from pyspark.sql import Column
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        if self.function is not None:
            column = self.function(events)
            if not isinstance(column, Column):
                returned = type(column).__name__
                raise ConfigError(f"route {self.spec!r}: the function must return a Column, not {returned}.")
            return column.cast("string")
        column = F.col(self.field_path[0])
        for part in self.field_path[1:]:
            column = column[part]  # a struct field or a map key
        return column.cast("string")

    def target(self, value: Column) -> Column:
        """The key of each event's table (see :meth:`table_name`), null for a rejected unknown value."""
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        if self.tables:
            pairs = [F.lit(part) for item in sorted(self.tables.items()) for part in item]
            known = F.create_map(*pairs)[value]
        else:
            known = F.when(value.rlike(VALUE_SUFFIX) & ~value.isin(sorted(RESERVED_SUFFIXES)), value)
        if self.unknown == "reject":
            return known
        return F.coalesce(known, F.lit(self.default or EVENTS_KEY))

    def keyed(self, events: DataFrame) -> DataFrame:
        """``events`` with the route's value and its table's key (:data:`VALUE_COLUMN`, :data:`TARGET_COLUMN`)."""
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        with_value = events.withColumn(VALUE_COLUMN, self.value(events))
        return with_value.withColumn(TARGET_COLUMN, self.target(F.col(VALUE_COLUMN)))

    def rejected(self, keyed: DataFrame) -> DataFrame:
        """The keyed rows with no table, with the transform's reject columns (reason and detail)."""
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        value = F.coalesce(F.col(VALUE_COLUMN), F.lit("null"))
        detail = F.concat(F.lit(f"route {self.spec}: no table for value "), value)
        return (
            keyed.where(F.col(TARGET_COLUMN).isNull())
            .withColumn(REASON_COLUMN, F.lit(UNKNOWN_ROUTE))
            .withColumn(DETAIL_COLUMN, detail)
        )


def _suffix(suffix: str | None, setting: str) -> str | None:
    if suffix is None:
        return None
    validate_identifier(suffix, setting)
    if suffix in RESERVED_SUFFIXES:
        raise ConfigError(f"{setting}: {suffix!r} names a table the workbook keeps for itself; choose another.")
    return suffix


def _mapping(tables: Iterable[str] | Mapping[str, str]) -> dict[str, str]:
    if isinstance(tables, Mapping):
        pairs = list(tables.items())
    else:
        pairs = []
        for item in tables:
            value, equals, suffix = str(item).partition("=")
            if not equals or not value.strip():
                raise ConfigError(f"route_tables {item!r}: write value=suffix, e.g. order=orders.")
            pairs.append((value.strip(), suffix.strip()))
    mapping: dict[str, str] = {}
    for value, suffix in pairs:
        if value in mapping:
            raise ConfigError(f"route_tables: value {value!r} is mapped twice.")
        mapping[str(value)] = _suffix(suffix, "route_tables") or ""
    return mapping


def routing_from_settings(settings: Settings, **overrides: Any) -> Routing | None:
    """The routing the settings describe (``route``, ``route_tables``, ``route_default``, ``route_unknown``).

    Args:
        settings: The settings.
        **overrides: Values of those four settings that replace the settings' (None: not given).

    Returns:
        The routing, or None when no route is set.

    Raises:
        ConfigError: For a bad route, pair, suffix or choice.
    """
    values = {name: getattr(settings, name) for name in ("route", "route_tables", "route_default", "route_unknown")}
    values.update({name: value for name, value in overrides.items() if value is not None})
    unknown = set(values) - {"route", "route_tables", "route_default", "route_unknown"}
    if unknown:
        raise ConfigError(f"unknown routing option(s): {', '.join(sorted(unknown))}.")
    if not values["route"]:
        if values["route_tables"] or values["route_default"]:
            raise ConfigError("route_tables and route_default need a route (--route FIELD or module:function).")
        return None
    tables = values["route_tables"]
    if isinstance(tables, str):
        tables = [part for part in tables.split(",") if part.strip()]
    return Routing.parse(values["route"], tables, values["route_default"], values["route_unknown"])


def routed_tables(spark: SparkSession, settings: Settings, routing: Routing, stream_name: str) -> list[str]:
    """Every table this routing writes that exists: the declared ones, and each table made on first sight
    (listed in the events table's :data:`ROUTED_PROPERTY`) that is recorded as fed by ``stream_name``.

    The list lives on the events table rather than in a listing of the namespace, so the ingest needs
    no catalog-wide permission (Glue's ``GetTables``) to find its tables again.
    """
    from icestream.ingest.positions import SOURCE_PROPERTY

    found = {name for name in routing.declared(settings) if spark.catalog.tableExists(name)}
    for suffix in filter(None, _properties(spark, settings.table_name).get(ROUTED_PROPERTY, "").split(",")):
        name = settings.companion_table_name(suffix)
        if spark.catalog.tableExists(name) and _properties(spark, name).get(SOURCE_PROPERTY) == stream_name:
            found.add(name)
    return sorted(found)


def remember_routed_table(spark: SparkSession, settings: Settings, name: str) -> None:
    """Add a table made on first sight to the events table's :data:`ROUTED_PROPERTY` (idempotent).

    Called before the new table commits anything, so a restart always finds a table that holds positions.
    """
    from icestream.lake.ddl import checked_table_name

    suffix = settings.companion_suffix(checked_table_name(name).rsplit(".", 1)[-1])
    if suffix is None:
        raise ConfigError(f"{name} is not a table beside {settings.table_name}; routed tables are <table>_<suffix>.")
    known = [part for part in _properties(spark, settings.table_name).get(ROUTED_PROPERTY, "").split(",") if part]
    if suffix not in known:
        # Suffixes are checked identifiers: they may stand in the statement's text.
        listed = ",".join(sorted({*known, validate_identifier(suffix, "route")}))
        spark.sql(f"ALTER TABLE {checked_table_name(settings.table_name)} SET TBLPROPERTIES "
                  f"('{ROUTED_PROPERTY}' = '{listed}')")  # fmt: skip


def _properties(spark: SparkSession, table: str) -> dict[str, str]:
    from icestream.lake.ddl import checked_table_name

    return {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {checked_table_name(table)}").collect()}
