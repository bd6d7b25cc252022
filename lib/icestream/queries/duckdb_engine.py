"""A second engine on the same table: DuckDB's iceberg extension reads what Spark wrote.

This is how Athena (or Trino, or any Iceberg reader) sees the table: no Spark, no catalog call at
query time, only the table's current metadata file, from which the reader finds the snapshot, its
manifests and the Parquet files. :func:`kpi_dashboard` is the dashboard of
:func:`icestream.queries.realtime.kpi_dashboard` in DuckDB's dialect (the same SQL,
:func:`icestream.queries.realtime.dashboard_sql`), returning the same :class:`~icestream.queries.realtime.Dashboard`.

DuckDB cannot download extensions here, so :func:`connect` loads them from the pinned wheels
``duckdb-extension-avro`` and ``duckdb-extension-iceberg`` by file path (avro first: iceberg reads
its manifests with it), with automatic installing and loading turned off. A warehouse on S3 adds
``httpfs`` (S3 reads) and ``aws`` (the credential chain) from their wheels, and an S3 secret: the
AWS credential chain on real AWS (environment, ``AWS_PROFILE``, SSO, instance role), the boto3
session's keys for an emulator or an assumed role (:mod:`icestream.runtime.aws`), and the S3 endpoint
with path-style URLs when one is set.

Where the metadata file is: ``LakeTable(spark, name).inspect.metadata_location()`` asks Iceberg's
Java API through the Spark session, which works for every catalog. Without Spark,
:func:`icestream.runtime.catalog.current_metadata_location` reads it from the JDBC catalog's SQLite file,
the Hadoop catalog's ``version-hint.text`` or the Glue table.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from icestream.config import Settings
from icestream.errors import ConfigError, DuckDBError
from icestream.lake.statement import Statement, show
from icestream.lake.window import trusted_event_sql
from icestream.queries.realtime import Dashboard, dashboard_from_parts, dashboard_sql, run_filter
from icestream.runtime import aws
from icestream.timestamps import to_micros

if TYPE_CHECKING:
    import pandas as pd

EXTENSIONS = ("avro", "iceberg")  # load order matters: iceberg needs avro
S3_EXTENSIONS = ("httpfs", "aws")  # S3 reads, and the AWS credential chain


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


def _literal(value: str) -> str:
    # CREATE SECRET takes no bind parameters; its values are quoted as SQL string literals.
    return "'{}'".format(value.replace("'", "''"))


def s3_secret_sql(settings: Settings, aws_session: Any = None) -> str:
    """The ``CREATE SECRET`` statement that lets DuckDB read the warehouse from S3.

    Args:
        settings: The active settings.
        aws_session: The boto3 session whose keys to use for an emulator or an assumed role
            (default: :func:`icestream.runtime.aws.session`).

    Returns:
        The statement (it holds keys only for an emulator or an assumed role).
    """
    options = {"TYPE": "s3", "REGION": _literal(settings.region)}
    if aws.dummy_keys(settings) is None and not settings.aws_role_arn:
        options["PROVIDER"] = "credential_chain"
    else:
        frozen = (aws_session or aws.session(settings)).get_credentials().get_frozen_credentials()
        options |= {"KEY_ID": _literal(frozen.access_key), "SECRET": _literal(frozen.secret_key)}
        if frozen.token:
            options["SESSION_TOKEN"] = _literal(frozen.token)
    if settings.s3_endpoint:
        host, tls = aws.endpoint_host(settings.s3_endpoint)
        options |= {"ENDPOINT": _literal(host), "URL_STYLE": "'path'", "USE_SSL": str(tls).lower()}
    return "CREATE OR REPLACE SECRET icestream_s3 ({})".format(", ".join(f"{k} {v}" for k, v in options.items()))


def connect(settings: Settings | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the avro and iceberg extensions loaded from the wheels.

    The session time zone is UTC, as Spark's is, so timestamps print the same in both engines.

    Args:
        settings: The active settings; with an ``s3://`` warehouse, S3 access is set up as well.

    Raises:
        DuckDBError: If an extension cannot be found or loaded, or the S3 secret is refused.
    """
    connection = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    on_s3 = settings is not None and settings.warehouse_uri.startswith("s3://")
    for name in (*S3_EXTENSIONS, *EXTENSIONS) if on_s3 else EXTENSIONS:
        path = extension_path(name)
        try:
            # LOAD takes no bind parameter; the path is the wheel's own file, quoted for SQL.
            connection.execute("LOAD '{}'".format(str(path).replace("'", "''")))
        except duckdb.Error as error:
            raise DuckDBError(f"DuckDB could not load {path}: {error}") from None
    if on_s3 and settings is not None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            connection.execute(s3_secret_sql(settings))
        except duckdb.Error as error:
            raise DuckDBError(f"DuckDB refused the S3 settings: {error}") from None
        except (BotoCoreError, ClientError) as error:  # the role could not be assumed
            raise DuckDBError(f"No AWS credentials for DuckDB's S3 reads: {error}. Check aws_role_arn.") from None
    connection.execute("SET TimeZone = 'UTC'")
    return connection


def statement_frame(connection: duckdb.DuckDBPyConnection, statement: Statement) -> pd.DataFrame:
    """Run a DuckDB statement (shown as it runs) and return its rows as a pandas frame."""
    # Through Arrow: DuckDB's own .df() uses pandas APIs that pandas 3 deprecates, and fetchall()
    # of TIMESTAMPTZ values needs pytz.
    show(statement)
    return connection.execute(statement.sql, dict(statement.args)).to_arrow_table().to_pandas()


def duckdb_statement(sql: str, parameters: dict[str, object]) -> Statement:
    """A DuckDB statement as a :class:`~icestream.lake.Statement` (``$name`` markers), to run and show."""
    return Statement(sql, parameters, marker="$")


def snapshots(connection: duckdb.DuckDBPyConnection, location: str) -> pd.DataFrame:
    """The snapshots DuckDB sees in a metadata file (``iceberg_snapshots``)."""
    return statement_frame(
        connection,
        duckdb_statement(
            "SELECT sequence_number, snapshot_id, timestamp_ms, manifest_list FROM iceberg_snapshots($location) "
            "ORDER BY sequence_number",
            {"location": location},
        ),
    )


def kpi_dashboard(
    connection: duckdb.DuckDBPyConnection,
    location: str,
    minutes: float | None = None,
    now: datetime | None = None,
    run_ids: Sequence[str] | None = None,
) -> Dashboard:
    """The KPI dashboard of :func:`icestream.queries.realtime.kpi_dashboard`, computed by DuckDB.

    Args:
        connection: From :func:`connect`.
        location: The table's metadata file (``LakeTable.inspect.metadata_location``).
        minutes: Window length; None reads every event.
        now: Window end (default: the newest trusted event in the table, as on the Spark side).
        run_ids: Count only these runs' events (``properties['run_id']``; None: every event).

    Returns:
        The dashboard; its ``statements`` are the SQL DuckDB ran (``$name`` markers, values bound).

    Raises:
        ConfigError: If ``minutes`` is not positive.
    """
    runs, run_args = run_filter(run_ids)
    runs = runs.replace(":run_", "$run_")  # the same condition, in DuckDB's marker style
    parameters: dict[str, object] = {"location": location, **run_args}
    where = f"WHERE true{runs}" if runs else ""
    if minutes is not None:
        if not minutes > 0:
            raise ConfigError(f"window minutes: {minutes} must be positive.")
        if now is None:
            trusted = trusted_event_sql("epoch_us")  # the default "now" rule of every engine (lake.window)
            sql = f"SELECT epoch_us(max(event_ts)) AS newest FROM iceberg_scan($location) WHERE {trusted}{runs}"
            newest = statement_frame(connection, duckdb_statement(sql, parameters))["newest"].iloc[0]
            end = 0 if newest is None or newest != newest else int(newest)  # NaN (no event) is not equal to itself
        else:
            end = to_micros(now)
        parameters |= {"start": end - round(minutes * 60_000_000), "end": end}
        where = (
            "WHERE event_ts > make_timestamptz($start::BIGINT) AND event_ts <= make_timestamptz($end::BIGINT)" + runs
        )
    totals, counts = (
        duckdb_statement(sql, parameters) for sql in dashboard_sql("iceberg_scan($location)", where, "epoch_us")
    )
    return dashboard_from_parts(
        statement_frame(connection, totals), statement_frame(connection, counts), (totals, counts)
    )
