"""A third engine on the same tables: pyiceberg reads them in Python, with no JVM.

pyiceberg (apache/iceberg-python) plans a scan from the table's metadata (snapshot, manifests,
column statistics), prunes files with the row filter, and reads the Parquet files with pyarrow.
:func:`open_table` opens a table through the same catalog Spark writes to:

- ``jdbc``: pyiceberg's ``SqlCatalog`` on the catalog's SQLite file, which must exist (Spark creates
  it): this module only reads, so it takes no write lock from the ingest and never creates the
  catalog's tables (``init_catalog_tables=false``).
- ``hadoop``: ``StaticTable.from_metadata`` on the current metadata file (the version hint).
- ``glue``: pyiceberg's ``GlueCatalog`` with a boto3 Glue client from :func:`icestream.runtime.aws.session`
  (the emulator's keys, or the assumed role), and S3 reads through pyarrow at the settings' endpoint.

:func:`events_by_type` answers the workbook's real-time question (events by type in the last N
minutes) so the three engines can be compared on one snapshot; ``snapshot_id`` reads an older one.
Its scan is a :class:`Scan` value, and the frame it returns carries the exact call it made
(``frame.attrs["scan"]``), written from the values used, so a notebook shows it.

The module is named for the library it wraps; ``import pyiceberg`` inside it is absolute and
finds the library, not this file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.lake.statement import show
from icestream.lake.window import trusted
from icestream.runtime import aws
from icestream.runtime.catalog import current_metadata_location
from icestream.timestamps import as_utc, from_micros, to_micros
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyiceberg.catalog.glue import GlueCatalog
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import Table

EVENT_TIME = "event_ts"
ARRIVAL_COLUMNS = ("arrival_ts", "ingest_ts")  # what trusted() compares an event time with
RUN_ID_KEY = "run_id"  # properties["run_id"]: the production run an event belongs to


def open_table(settings: Settings, table: str | None = None) -> Table:
    """Open a table of the namespace through the active catalog.

    Args:
        settings: The settings (catalog type and name, warehouse, namespace).
        table: Table name in the namespace (default: the events table).

    Returns:
        The pyiceberg table, at its current metadata.

    Raises:
        ConfigError: If the catalog or the table does not exist yet.
        ServiceUnavailableError: If Glue does not answer or refuses the request.
    """
    from pyiceberg.exceptions import NoSuchTableError

    name = validate_identifier(table or settings.table, "table")
    if settings.catalog_type == "hadoop":
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(current_metadata_location(settings, name))
    if settings.catalog_type == "glue":
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return glue_catalog(settings).load_table((validate_identifier(settings.namespace, "namespace"), name))
        except NoSuchTableError:
            raise ConfigError(
                f"table {settings.namespace}.{name} is not in the Glue catalog: create it first (00_setup)."
            ) from None
        except (BotoCoreError, ClientError) as error:
            raise aws.glue_unavailable(settings, f"{settings.namespace}.{name}", error) from None
    from pyiceberg.catalog.sql import SqlCatalog

    path = settings.catalog_file
    if not path.is_file():
        raise ConfigError(f"the catalog {path} does not exist yet: create the tables first (00_setup).")
    catalog = SqlCatalog(
        settings.catalog,  # the name Spark's JdbcCatalog records in every row
        uri=f"sqlite:///{path}",
        warehouse=Path(settings.warehouse_uri).as_uri(),
        init_catalog_tables="false",
    )
    try:
        return catalog.load_table((validate_identifier(settings.namespace, "namespace"), name))
    except NoSuchTableError:
        raise ConfigError(
            f"table {settings.namespace}.{name} is not in the catalog {path}: create it first (00_setup)."
        ) from None


def glue_catalog(settings: Settings) -> GlueCatalog:
    """pyiceberg's Glue catalog for the active settings (endpoints, catalog id, credentials).

    Returns:
        The catalog, named like Spark's (``settings.catalog``).
    """
    from pyiceberg.catalog.glue import GlueCatalog

    aws_session = aws.session(settings)
    return GlueCatalog(
        settings.catalog,
        client=aws.client(settings, "glue", aws_session),
        **aws.pyiceberg_properties(settings, aws_session),
    )


def snapshots(table: Table) -> pd.DataFrame:
    """The snapshots pyiceberg sees, oldest first.

    Returns:
        ``snapshot_id``, ``parent_id``, ``committed_at`` (UTC), ``operation``.
    """
    import pandas as pd

    rows = [
        (
            snapshot.snapshot_id,
            snapshot.parent_snapshot_id,
            datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC),
            None if snapshot.summary is None else snapshot.summary.operation.value,
        )
        for snapshot in table.metadata.snapshots
    ]
    frame = pd.DataFrame(rows, columns=["snapshot_id", "parent_id", "committed_at", "operation"])
    return frame.sort_values("committed_at", ignore_index=True)


@dataclass(frozen=True)
class Scan:
    """One pyiceberg scan, as values: the window of its row filter, its columns and snapshot.

    ``str(scan)`` is the call :meth:`to_arrow` makes, written from these values (times as ISO text,
    which pyiceberg reads for a timestamp column just as it reads microseconds).

    Attributes:
        start: Exclusive window start (aware UTC), or None.
        end: Inclusive window end (aware UTC), or None.
        columns: ``selected_fields``.
        snapshot_id: The snapshot (None: the current one).
        run_ids: Keep only rows of these runs, after the read (pyiceberg cannot filter on a map value).
    """

    start: datetime | None = None
    end: datetime | None = None
    columns: tuple[str, ...] = ("*",)
    snapshot_id: int | None = None
    run_ids: tuple[str, ...] | None = None

    def row_filter_terms(self) -> list[tuple[str, str]]:
        """``(expression class, ISO time)`` pairs of the row filter, in order."""
        terms = []
        if self.start is not None:
            terms.append(("GreaterThan", as_utc(self.start).isoformat()))
        if self.end is not None:
            terms.append(("LessThanOrEqual", as_utc(self.end).isoformat()))
        return terms

    def row_filter(self) -> BooleanExpression:
        """The row filter pyiceberg receives."""
        from pyiceberg import expressions

        built: BooleanExpression = expressions.AlwaysTrue()
        for kind, moment in self.row_filter_terms():
            built = expressions.And(built, getattr(expressions, kind)(EVENT_TIME, moment))
        return built

    def fields(self) -> tuple[str, ...]:
        """The columns read: those asked for, and ``properties`` when runs are filtered."""
        if self.run_ids is None or "*" in self.columns or "properties" in self.columns:
            return self.columns
        return (*self.columns, "properties")

    def __str__(self) -> str:
        terms = [f'{kind}("{EVENT_TIME}", "{moment}")' for kind, moment in self.row_filter_terms()]
        row_filter = "AlwaysTrue()" if not terms else terms[0] if len(terms) == 1 else f"And({', '.join(terms)})"
        arguments = f"row_filter={row_filter}, selected_fields={self.fields()!r}, snapshot_id={self.snapshot_id!r}"
        call = f"table.scan({arguments}).to_arrow()"
        if self.run_ids is not None:
            call += f"\n# then keep rows whose properties['{RUN_ID_KEY}'] is in {list(self.run_ids)!r} (pyarrow)"
        return call

    def to_arrow(self, table: Table) -> pa.Table:
        """Run the scan on ``table`` (and keep only the runs asked for).

        Raises:
            ConfigError: If the table has no snapshot ``snapshot_id``.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.snapshot_id is not None and table.snapshot_by_id(self.snapshot_id) is None:
            raise ConfigError(f"the table has no snapshot {self.snapshot_id} (expired, or from another table).")
        rows = table.scan(row_filter=self.row_filter(), selected_fields=self.fields(), snapshot_id=self.snapshot_id)
        rows = rows.to_arrow()
        if self.run_ids is None:
            return rows
        run_of = pc.map_lookup(rows["properties"], pa.scalar(RUN_ID_KEY), "first")
        keep = pc.fill_null(pc.is_in(run_of, value_set=pa.array(list(self.run_ids), pa.string())), False)
        return rows.filter(keep)


def read(
    table: Table,
    snapshot_id: int | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    columns: tuple[str, ...] = ("*",),
) -> pa.Table:
    """Read a snapshot's rows, optionally only events with ``start < event_ts <= end``.

    The window is a row filter, so pyiceberg skips the files (hidden ``hours(event_ts)``
    partitions and column bounds) that cannot hold a matching row.

    Args:
        table: From :func:`open_table`.
        snapshot_id: The snapshot to read (default: the current one).
        start: Exclusive window start (aware or naive UTC).
        end: Inclusive window end.
        columns: Columns to return (filter columns are read as needed).

    Returns:
        The rows as an Arrow table.

    Raises:
        ConfigError: If the table has no snapshot ``snapshot_id``.
    """
    return Scan(start, end, columns, snapshot_id).to_arrow(table)


def newest_event_ts(
    table: Table, snapshot_id: int | None = None, run_ids: Sequence[str] | None = None
) -> datetime | None:
    """A snapshot's default "now": its newest trusted ``event_ts`` (UTC), or None when it holds no event.

    Trusted: no more than ``ARRIVAL_TOLERANCE`` after the event's arrival, the rule every engine
    applies (:mod:`icestream.lake.window`), so one bogus far-future time cannot set "now".
    """
    import pyarrow.compute as pc

    runs = None if run_ids is None else tuple(run_ids)
    rows = Scan(columns=(EVENT_TIME, *ARRIVAL_COLUMNS), snapshot_id=snapshot_id, run_ids=runs).to_arrow(table)
    newest = pc.max(rows.filter(trusted(rows))[EVENT_TIME]).as_py()
    return None if newest is None else as_utc(newest)


def events_by_type(
    table: Table,
    minutes: float | None = None,
    now: datetime | None = None,
    snapshot_id: int | None = None,
    run_ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Events by type in the window ``(now - minutes, now]`` of a snapshot, computed by pyiceberg.

    Args:
        table: From :func:`open_table`.
        minutes: Window length; None counts every event of the snapshot.
        now: Window end (default: the snapshot's newest trusted event, :func:`newest_event_ts`, as
            Spark and DuckDB default to).
        snapshot_id: The snapshot to read (default: the current one).
        run_ids: Count only these runs' events (None: every event).

    Returns:
        ``event_type``, ``events``, most first (ties by type); a null type shows as ``(none)``.
        ``attrs["scan"]`` holds the scan it ran (:class:`Scan`).

    Raises:
        ConfigError: If ``minutes`` is not positive, or the snapshot holds no event and ``now`` is not given.
    """

    runs = None if run_ids is None else tuple(run_ids)
    start = end = None
    if minutes is not None:
        if not minutes > 0:
            raise ConfigError(f"window minutes: {minutes} must be positive.")
        end = newest_event_ts(table, snapshot_id, runs) if now is None else now
        if end is None:
            raise ConfigError("the snapshot has no events yet: run the ingest (02_stream_ingest) first, or pass now=.")
        start = from_micros(to_micros(end) - round(minutes * 60_000_000))
    scan = Scan(start, None if end is None else as_utc(end), ("event_type",), snapshot_id, runs)
    rows = scan.to_arrow(table).select(["event_type"])
    counts = rows.group_by("event_type").aggregate([([], "count_all")]).to_pandas()
    counts = counts.rename(columns={"count_all": "events"}).astype({"events": "int64"})
    counts = counts.fillna({"event_type": "(none)"})
    ordered = counts.sort_values(["events", "event_type"], ascending=[False, True], ignore_index=True)
    frame = ordered[["event_type", "events"]]
    frame.attrs["scan"] = scan
    show(scan)
    return frame
