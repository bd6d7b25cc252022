"""A second engine on the same table: DuckDB's iceberg extension reads what Spark wrote.

This is how Athena (or Trino, or any Iceberg reader) sees the table: no Spark, no catalog call at
query time, only the table's current metadata file, from which the reader finds the snapshot, its
manifests and the Parquet files. :func:`kpi_dashboard` is the dashboard of
:func:`icestream.realtime.kpi_dashboard` in DuckDB's dialect (the same SQL,
:func:`icestream.realtime.dashboard_sql`), returning the same :class:`~icestream.realtime.Dashboard`.

DuckDB cannot download extensions here, so :func:`connect` loads them from the pinned wheels
``duckdb-extension-avro`` and ``duckdb-extension-iceberg`` by file path (avro first: iceberg reads
its manifests with it), with automatic installing and loading turned off.

Where the metadata file is: ``LakeTable(spark, name).inspect.metadata_location()`` asks Iceberg's
Java API through the Spark session, which works for every catalog. Without Spark,
:func:`icestream.catalog.current_metadata_location` reads it from the JDBC catalog's SQLite file
(or the Hadoop catalog's ``version-hint.text``); a Glue table's metadata lives in S3, which this
local set-up does not read (DuckDB would need its ``httpfs`` extension and AWS credentials).
"""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from icestream.errors import ConfigError, DuckDBError
from icestream.realtime import Dashboard, dashboard_from_parts, dashboard_sql
from icestream.timestamps import to_micros

if TYPE_CHECKING:
    import pandas as pd

EXTENSIONS = ("avro", "iceberg")  # load order matters: iceberg needs avro


def extension_path(name: str) -> Path:
    """The extension file shipped in the ``duckdb-extension-<name>`` wheel for this DuckDB version.

    Raises:
        DuckDBError: If the wheel is not installed or holds no file for this DuckDB version.
    """
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or spec.origin is None:
        raise DuckDBError(
            f"The DuckDB {name} extension is not installed: run `pip install duckdb-extension-{name}=="
            f"{duckdb.__version__}` (make setup installs it)."
        )
    path = Path(spec.origin).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.is_file():
        raise DuckDBError(
            f"{path} is missing: the duckdb-extension-{name} wheel must have the same version as duckdb "
            f"({duckdb.__version__})."
        )
    return path


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the avro and iceberg extensions loaded from the wheels.

    The session time zone is UTC, as Spark's is, so timestamps print the same in both engines.

    Raises:
        DuckDBError: If an extension cannot be found or loaded.
    """
    connection = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for name in EXTENSIONS:
        path = extension_path(name)
        try:
            # LOAD takes no bind parameter; the path is the wheel's own file, quoted for SQL.
            connection.execute("LOAD '{}'".format(str(path).replace("'", "''")))
        except duckdb.Error as error:
            raise DuckDBError(f"DuckDB could not load {path}: {error}") from None
    connection.execute("SET TimeZone = 'UTC'")
    return connection


def _frame(connection: duckdb.DuckDBPyConnection, sql: str, parameters: dict[str, object]) -> pd.DataFrame:
    # Through Arrow: DuckDB's own .df() uses pandas APIs that pandas 3 deprecates, and fetchall()
    # of TIMESTAMPTZ values needs pytz.
    return connection.execute(sql, parameters).to_arrow_table().to_pandas()


def snapshots(connection: duckdb.DuckDBPyConnection, location: str) -> pd.DataFrame:
    """The snapshots DuckDB sees in a metadata file (``iceberg_snapshots``)."""
    return _frame(
        connection,
        "SELECT sequence_number, snapshot_id, timestamp_ms, manifest_list FROM iceberg_snapshots($location) "
        "ORDER BY sequence_number",
        {"location": location},
    )


def kpi_dashboard(
    connection: duckdb.DuckDBPyConnection,
    location: str,
    minutes: float | None = None,
    now: datetime | None = None,
) -> Dashboard:
    """The KPI dashboard of :func:`icestream.realtime.kpi_dashboard`, computed by DuckDB.

    Args:
        connection: From :func:`connect`.
        location: The table's metadata file (``LakeTable.inspect.metadata_location``).
        minutes: Window length; None reads every event.
        now: Window end (default: the newest event in the table, as on the Spark side).

    Returns:
        The dashboard.

    Raises:
        ConfigError: If ``minutes`` is not positive.
    """
    parameters: dict[str, object] = {"location": location}
    where = ""
    if minutes is not None:
        if not minutes > 0:
            raise ConfigError(f"window minutes: {minutes} must be positive.")
        if now is None:
            newest = connection.execute(
                "SELECT epoch_us(max(event_ts)) FROM iceberg_scan($location)", parameters
            ).fetchone()[0]
            end = int(newest) if newest is not None else 0
        else:
            end = to_micros(now)
        parameters |= {"start": end - round(minutes * 60_000_000), "end": end}
        where = "WHERE event_ts > make_timestamptz($start::BIGINT) AND event_ts <= make_timestamptz($end::BIGINT)"
    totals, counts = dashboard_sql("iceberg_scan($location)", where, "epoch_us")
    return dashboard_from_parts(_frame(connection, totals, parameters), _frame(connection, counts, parameters))
