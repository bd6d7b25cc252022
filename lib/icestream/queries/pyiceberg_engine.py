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

The module is named for the library it wraps; ``import pyiceberg`` inside it is absolute and
finds the library, not this file.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.runtime import aws
from icestream.runtime.catalog import current_metadata_location
from icestream.timestamps import as_utc, from_micros, to_micros
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyiceberg.catalog.glue import GlueCatalog
    from pyiceberg.table import Table

EVENT_TIME = "event_ts"


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
    from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, GreaterThan, LessThanOrEqual

    if snapshot_id is not None and table.snapshot_by_id(snapshot_id) is None:
        raise ConfigError(f"the table has no snapshot {snapshot_id} (expired, or from another table).")
    row_filter: BooleanExpression = AlwaysTrue()
    if start is not None:
        row_filter = And(row_filter, GreaterThan(EVENT_TIME, to_micros(start)))
    if end is not None:
        row_filter = And(row_filter, LessThanOrEqual(EVENT_TIME, to_micros(end)))
    return table.scan(row_filter=row_filter, selected_fields=columns, snapshot_id=snapshot_id).to_arrow()


def newest_event_ts(table: Table, snapshot_id: int | None = None) -> datetime | None:
    """The newest ``event_ts`` of a snapshot (UTC), or None when it holds no event."""
    import pyarrow.compute as pc

    newest = pc.max(read(table, snapshot_id, columns=(EVENT_TIME,))[EVENT_TIME]).as_py()
    return None if newest is None else as_utc(newest)


def events_by_type(
    table: Table,
    minutes: float | None = None,
    now: datetime | None = None,
    snapshot_id: int | None = None,
) -> pd.DataFrame:
    """Events by type in the window ``(now - minutes, now]`` of a snapshot, computed by pyiceberg.

    Args:
        table: From :func:`open_table`.
        minutes: Window length; None counts every event of the snapshot.
        now: Window end (default: the snapshot's newest event, as Spark and DuckDB default to).
        snapshot_id: The snapshot to read (default: the current one).

    Returns:
        ``event_type``, ``events``, most first (ties by type); a null type shows as ``(none)``.

    Raises:
        ConfigError: If ``minutes`` is not positive, or the snapshot holds no event and ``now`` is not given.
    """
    start = end = None
    if minutes is not None:
        if not minutes > 0:
            raise ConfigError(f"window minutes: {minutes} must be positive.")
        end = now if now is not None else newest_event_ts(table, snapshot_id)
        if end is None:
            raise ConfigError("the snapshot has no events yet: run the ingest (02_stream_ingest) first, or pass now=.")
        start = from_micros(to_micros(end) - round(minutes * 60_000_000))
    rows = read(table, snapshot_id, start, end, columns=("event_type",))
    counts = rows.group_by("event_type").aggregate([([], "count_all")]).to_pandas()
    counts = counts.rename(columns={"count_all": "events"}).astype({"events": "int64"})
    counts = counts.fillna({"event_type": "(none)"})
    return counts.sort_values(["events", "event_type"], ascending=[False, True], ignore_index=True)[
        ["event_type", "events"]
    ]
