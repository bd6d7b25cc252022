"""Routing: each event goes to the table its route names; tables are created the first time they are seen.

A route is a field of the event (``event_type``, or a map key such as ``properties.kind``) or a
function ``DataFrame -> Column`` named ``module:function``, evaluated over the batch's events
after dedupe and the transform; it must be deterministic (a batch re-read after a crash is routed
again). Its value picks the table:

- with a mapping (``route_tables``: ``value=suffix`` pairs) a value goes to ``<table>_<suffix>``;
- without one, a value that is a lower-case identifier goes to ``<table>_<value>``;
- any other value (null, unmapped, not an identifier, companion-like as below, or naming a table
  this route does not own) is *unknown*: it goes to the default table (``route_default``, else the
  events table itself) or, with ``route_unknown: reject``, to the shared rejects table with reason
  :data:`UNKNOWN_ROUTE` and the route, the value and (when it names one) the table in its detail.

A route writes only into tables it owns (:func:`refusal`): one it made itself, which records in its
properties, set in the very commit that creates it, the events table whose route made it
(:data:`OWNER_PROPERTY`) and the stream that feeds it; or one made before tables recorded their
owner, listed on the events table, fed by this stream and carrying the comment routed tables are
made with. Any other table with the name (another pipeline's ``<table>_orders``, or its
``<table>_orders_rejects``) is never written: ``CREATE TABLE IF NOT EXISTS`` would accept it as it
is and the append match its columns by name, losing the events and taking the table's
``icestream.source-stream`` from its owner (issue 43). The decision is taken for every table of a
batch before anything of the batch commits. A table that ``route_tables`` or ``route_default``
names and that the route does not own stops the ingest with a :class:`~icestream.errors.ConfigError`
instead: the settings, not the data, are wrong.

Companion-like suffixes are refused too, whether or not such a table exists yet
(:data:`COMPANION_LIKE`): a suffix the workbook keeps for a companion (``rejects``, ``raw``,
``metrics``, the notebooks' copies and the demos' tables, such as ``metrics_demo``:
:data:`RESERVED_SUFFIXES`), alone or after ``_``. A demo drops and makes its tables again on every
run, so a routed ``<table>_metrics_demo`` would stand in notebook 07's way (the demo leaves a table
it did not make, and stops: :mod:`icestream.lake.demo_tables`). Routed,
``orders_rejects`` or ``orders_metrics`` would take the name that a companion of a routed table
``<table>_orders`` gets later (its metrics, refreshed per table), or that a companion of another
pipeline's events table ``<table>_orders`` has. Such a value is unknown; such a suffix in
``route_tables`` or ``route_default`` is a :class:`~icestream.errors.ConfigError`. A value such as
``first_raw`` is refused with them: map it to another suffix (``first_raw=first_raw_events``).

Every table name comes from :class:`~icestream.config.Settings` (``companion_table_name``), so a
routed table is always ``<table>_<suffix>`` in the events table's namespace. A routed table is
created on first sight with the events table's declared schema, partitioning and properties
(:func:`icestream.lake.ddl.create_routed_table`), and recorded as fed by this stream (a table
property) and listed on the events table (:data:`ROUTED_PROPERTY`), which is how a restart finds
every routed table again (:func:`routed_tables`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from icestream.config import (
    ARCHIVE_SUFFIX,
    COPY_SUFFIXES,
    DEMO_TABLE_SUFFIXES,
    METRICS_SUFFIX,
    REJECTS_SUFFIX,
    Settings,
)
from icestream.errors import ConfigError
from icestream.ingest.positions import SOURCE_PROPERTY
from icestream.ingest.transform import DETAIL_COLUMN, REASON_COLUMN, load_function
from icestream.lake.ddl import routed_table_comment
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

UNKNOWN_ROUTE = "unknown_route"  # the reject reason of an event whose route names no table
UNKNOWN_CHOICES = ("default", "reject")
TARGET_COLUMN = "_icestream_route_table"  # the routed table's key while a batch is split (dropped before writes)
VALUE_COLUMN = "_icestream_route_value"
# The demos' tables too: a demo drops and makes its tables again on every run (issue 58).
RESERVED_SUFFIXES = frozenset((REJECTS_SUFFIX, ARCHIVE_SUFFIX, METRICS_SUFFIX, *COPY_SUFFIXES, *DEMO_TABLE_SUFFIXES))
# A reserved suffix, alone or after "_": orders_rejects would collide with the companions of <table>_orders.
COMPANION_LIKE = rf"(^|_)({'|'.join(sorted(RESERVED_SUFFIXES))})$"
# Values that name a table by themselves (no mapping): lower case, so two spellings never make two tables.
VALUE_SUFFIX = r"^[a-z][a-z0-9_]{0,63}$"
EVENTS_KEY = ""  # the key of the events table itself
ROUTED_PROPERTY = "icestream.routed-tables"  # on the events table: suffixes of the tables made on first sight
OWNER_PROPERTY = "icestream.routed-from"  # on a routed table: the events table whose route made it


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
        cls,
        spec: str,
        tables: Iterable[str] | Mapping[str, str] = (),
        default: str | None = None,
        unknown: str = "default",
    ) -> Routing:
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
        function = None
        path: tuple[str, ...] = ()
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
        return (
            settings.table_name if key == EVENTS_KEY else settings.companion_table_name(_checked_suffix(key, "route"))
        )

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

    def _named(self, value: Column) -> Column:
        """The key a value names (null: none), before the tables the route does not own are taken out."""
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        if self.tables:
            pairs = [F.lit(part) for item in sorted(self.tables.items()) for part in item]
            return F.create_map(*pairs)[value]
        return F.when(value.rlike(VALUE_SUFFIX) & ~value.rlike(COMPANION_LIKE), value)

    def target(self, value: Column, refused: Collection[str] = ()) -> Column:
        """The key of each event's table (see :meth:`table_name`), null for a rejected unknown value.

        Args:
            value: The route's value of each event.
            refused: Keys of tables the route does not own (:func:`refusal`): their values are unknown.
        """
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        known = self._named(value)
        if refused:
            known = F.when(~known.isin(sorted(refused)), known)
        if self.unknown == "reject":
            return known
        return F.coalesce(known, F.lit(self.default or EVENTS_KEY))

    def keyed(self, events: DataFrame, refused: Collection[str] = ()) -> DataFrame:
        """``events`` with the route's value and its table's key (:data:`VALUE_COLUMN`, :data:`TARGET_COLUMN`);
        ``refused`` as in :meth:`target`."""
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        with_value = events.withColumn(VALUE_COLUMN, self.value(events))
        return with_value.withColumn(TARGET_COLUMN, self.target(F.col(VALUE_COLUMN), refused))

    def rejected(self, keyed: DataFrame, settings: Settings, refused: Mapping[str, str] | None = None) -> DataFrame:
        """The keyed rows with no table, with the transform's reject columns (reason and detail).

        Args:
            keyed: The batch's events as :meth:`keyed` made them.
            settings: Name the tables, for the detail of a value that names one it may not write.
            refused: Per key of a table the route does not own, why (:func:`refusal`).
        """
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        raw = F.col(VALUE_COLUMN)
        value = F.coalesce(raw, F.lit("null"))
        said = f"route {self.spec}: "
        detail = F.concat(F.lit(f"{said}no table for value "), value)
        if not self.tables:  # a mapping's suffixes were checked when it was parsed
            companion = F.concat(
                F.lit(f"{said}value "),
                value,
                F.lit(" would name "),
                F.lit(f"{settings.table_name}_"),
                value,
                F.lit(f", a companion's name ({', '.join(sorted(RESERVED_SUFFIXES))}) the workbook keeps for itself"),
            )
            detail = F.when(raw.rlike(VALUE_SUFFIX) & raw.rlike(COMPANION_LIKE), companion).otherwise(detail)
        if refused:
            named = self._named(raw)
            reasons = [
                F.lit(part)
                for key, why in sorted(refused.items())
                for part in (key, f"{self.table_name(settings, key)}, a table this route does not own ({why})")
            ]
            owned_by_others = F.concat(F.lit(f"{said}value "), value, F.lit(" names "), F.create_map(*reasons)[named])
            detail = F.when(named.isin(sorted(refused)), owned_by_others).otherwise(detail)
        return (
            keyed.where(F.col(TARGET_COLUMN).isNull())
            .withColumn(REASON_COLUMN, F.lit(UNKNOWN_ROUTE))
            .withColumn(DETAIL_COLUMN, detail)
        )


def _suffix(suffix: str | None, setting: str) -> str | None:
    return None if suffix is None else _checked_suffix(suffix, setting)


def _checked_suffix(suffix: str, setting: str) -> str:
    validate_identifier(suffix, setting)
    if re.search(COMPANION_LIKE, suffix):
        raise ConfigError(
            f"{setting}: {suffix!r} names a table the workbook keeps for itself, or would collide with a "
            f"companion of another table (its suffix ends like {', '.join(sorted(RESERVED_SUFFIXES))}); choose another."
        )
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


def refusal(properties: Mapping[str, str] | None, settings: Settings, stream_name: str, listed: bool) -> str | None:
    """Why the route of ``settings``' events table may not write a routed table (None: it may).

    Args:
        properties: The table's properties, with its comment as ``comment`` (Iceberg keeps it as that
            property, but ``SHOW TBLPROPERTIES`` hides it); None when it does not exist (the route makes it).
        settings: Name the events table whose route asks.
        stream_name: The stream the route's ingest reads.
        listed: Whether the events table lists the table in :data:`ROUTED_PROPERTY`.

    Returns:
        None for a table the route owns (see the module docstring), else the reason, for a reject's detail.
    """
    if properties is None:
        return None
    source, owner = properties.get(SOURCE_PROPERTY), properties.get(OWNER_PROPERTY)
    if source != stream_name:
        return f"fed by stream {source!r}" if source else "no stream feeds it"
    if owner == settings.table_name:
        return None
    if owner is None and listed and properties.get("comment") == routed_table_comment(stream_name):
        return None  # made by this route before routed tables recorded their owner
    return f"routed from {owner}" if owner else f"not made by the route of {settings.table_name}"


def owner_properties(settings: Settings) -> dict[str, str]:
    """The properties a routed table is created with, which make it this route's (:func:`refusal`)."""
    return {OWNER_PROPERTY: settings.table_name, SOURCE_PROPERTY: settings.stream_name}


def table_refusal(spark: SparkSession, settings: Settings, name: str, stream_name: str) -> str | None:
    """:func:`refusal` of the table ``name`` as the catalog has it now (the events table itself: None)."""
    if name == settings.table_name or not spark.catalog.tableExists(name):
        return None
    properties = {**_properties(spark, name), "comment": spark.catalog.getTable(name).description or ""}
    return refusal(properties, settings, stream_name, name in _listed(spark, settings))


def routed_tables(spark: SparkSession, settings: Settings, routing: Routing, stream_name: str) -> list[str]:
    """Every table this routing writes that exists: the declared ones, and each table made on first sight
    (listed in the events table's :data:`ROUTED_PROPERTY`) that the route owns (:func:`refusal`).

    The list lives on the events table rather than in a listing of the namespace, so the ingest needs
    no catalog-wide permission (Glue's ``GetTables``) to find its tables again.

    Raises:
        ConfigError: If a declared table (``route_tables``, ``route_default``) exists and is not the route's.
    """
    found = set()
    for name in routing.declared(settings):
        if spark.catalog.tableExists(name):
            found.add(declared_table(name, table_refusal(spark, settings, name, stream_name)))
    for name in sorted(_listed(spark, settings) - found):
        if spark.catalog.tableExists(name) and table_refusal(spark, settings, name, stream_name) is None:
            found.add(name)
    return sorted(found)


def owned_tables(spark: SparkSession, settings: Settings) -> list[str]:
    """Every routed table that exists and that the route of ``settings``' events table owns, for a reset to drop.

    Found as a restart finds them, from the list on the events table (:data:`ROUTED_PROPERTY`), with the
    tables the settings' route names (``route_tables``, ``route_default``) in case the events table is gone.
    A table of the name that the route does not own (:func:`refusal`) is another pipeline's: left out.
    """
    listed = _listed(spark, settings) if spark.catalog.tableExists(settings.table_name) else set()
    routing = routing_from_settings(settings)
    declared = set(routing.declared(settings)) if routing is not None else set()
    owned = []
    for name in sorted((listed | declared) - {settings.table_name}):
        if not spark.catalog.tableExists(name):
            continue
        properties = {**_properties(spark, name), "comment": spark.catalog.getTable(name).description or ""}
        if refusal(properties, settings, settings.stream_name, name in listed) is None:
            owned.append(name)
    return owned


def claim_tables(
    spark: SparkSession, settings: Settings, routing: Routing, keys: Iterable[str], known: Collection[str]
) -> dict[str, str]:
    """Make the routed table of each key unless it exists or is ``known`` (the tables already in use).

    Args:
        spark: The session.
        settings: Name the tables and the stream.
        routing: The route.
        keys: The keys a batch routes to.
        known: Tables the ingest writes already (not asked again).

    Returns:
        Per key whose table the route may not write (:func:`refusal`), why.

    Raises:
        ConfigError: If the settings name such a table (route_tables, route_default).
    """
    from icestream.lake.ddl import create_routed_table

    refused = {}
    for key in sorted(keys):
        name = routing.table_name(settings, key)
        if name in known:
            continue
        if not spark.catalog.tableExists(name):
            create_routed_table(spark, settings, name, properties=owner_properties(settings))
        # Asked after the CREATE: when another writer made the table first, its properties say whose it is.
        why = table_refusal(spark, settings, name, settings.stream_name)
        if name in routing.declared(settings):
            declared_table(name, why)  # raises: the settings, not the data, name another's table
        if why is not None:
            refused[key] = why
    return refused


def declared_table(name: str, why: str | None) -> str:
    """``name``, a table the settings route to, when the route owns it (``why`` is None).

    Raises:
        ConfigError: If it does not: the route would write into another pipeline's table.
    """
    if why is not None:
        raise ConfigError(
            f"{name} is named by route_tables or route_default but is not a table of this route ({why}); "
            "choose another suffix, or drop or rename that table if it is a left-over."
        )
    return name


def _listed(spark: SparkSession, settings: Settings) -> set[str]:
    """The tables the events table lists in :data:`ROUTED_PROPERTY`."""
    suffixes = _properties(spark, settings.table_name).get(ROUTED_PROPERTY, "").split(",")
    return {settings.companion_table_name(suffix) for suffix in suffixes if suffix}


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
        spark.sql(
            f"ALTER TABLE {checked_table_name(settings.table_name)} SET TBLPROPERTIES "
            f"('{ROUTED_PROPERTY}' = '{listed}')"
        )


def _properties(spark: SparkSession, table: str) -> dict[str, str]:
    from icestream.lake.ddl import checked_table_name

    return {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {checked_table_name(table)}").collect()}
