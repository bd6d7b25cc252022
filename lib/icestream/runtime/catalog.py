"""The Iceberg catalog behind the tables: which one, whether it is safe, where a table's metadata is.

A catalog maps a table name to the table's current metadata file, and a commit is a swap of that
pointer. How the swap is made decides who may write at the same time:

- ``jdbc`` (the ``local`` default): Iceberg's ``JdbcCatalog`` on a SQLite file in the warehouse
  (``catalog.db``). A commit is ``UPDATE ... SET metadata_location = new WHERE metadata_location =
  old``, atomic in SQLite, so writers in several processes (the ingest, a notebook's compaction)
  cannot lose each other's commits. pyiceberg's ``SqlCatalog`` opens the same file.
- ``hadoop``: the pointer is the highest ``vN.metadata.json`` and a commit is a rename checked
  under a lock held inside one JVM: safe within one process only.
- ``glue``: AWS Glue's optimistic table versions: safe for several writers.

:func:`current_metadata_location` finds a table's current metadata file without Spark (for DuckDB
and pyiceberg): in the JDBC catalog's SQLite file, the Hadoop catalog's version hint, or the Glue
table's ``metadata_location`` parameter (where Iceberg's GlueCatalog and Athena keep it).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.runtime import aws
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    pass

SEVERAL_WRITERS = {"jdbc": True, "glue": True, "hadoop": False}
SQLITE_TIMEOUT_SECONDS = 30.0  # wait for another process's commit rather than fail

# Iceberg 1.10's JdbcCatalog tables (JdbcUtil: V0 table + the V1 iceberg_type column, and namespace
# properties), created here so that Spark can start with jdbc.init-catalog-tables=false: Iceberg's
# own check for them leaves a DatabaseMetaData result set open, and on SQLite that open statement
# holds a read lock for the JVM's lifetime, so no other process could ever commit.
JDBC_CATALOG_DDL = (
    "CREATE TABLE IF NOT EXISTS iceberg_tables(catalog_name VARCHAR(255) NOT NULL,"
    "table_namespace VARCHAR(255) NOT NULL,table_name VARCHAR(255) NOT NULL,metadata_location VARCHAR(1000),"
    "previous_metadata_location VARCHAR(1000),iceberg_type VARCHAR(5),"
    "PRIMARY KEY (catalog_name, table_namespace, table_name))",
    "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties(catalog_name VARCHAR(255) NOT NULL,"
    "namespace VARCHAR(255) NOT NULL,property_key VARCHAR(255),property_value VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, namespace, property_key))",
)


def several_writers_safe(settings: Settings) -> bool:
    """True when the active catalog keeps commits from several processes apart (jdbc, glue)."""
    return SEVERAL_WRITERS[settings.catalog_type]


def describe_catalog(settings: Settings) -> str:
    """One line for ``icestream doctor``: the active catalog, where it is, and who may write.

    Args:
        settings: The active settings.

    Returns:
        For example ``jdbc (SQLite data/warehouse/catalog.db): safe for several writing processes``.
    """
    created = "" if settings.catalog_file.is_file() else ", created on first use"
    where = {
        "jdbc": f"SQLite {settings.catalog_file}{created}",
        "hadoop": f"warehouse {settings.warehouse_uri}",
        "glue": f"AWS Glue in {settings.region}"
        + (f" at {settings.glue_endpoint}" if settings.glue_endpoint else "")
        + (f" (catalog of account {settings.glue_catalog_id})" if settings.glue_catalog_id else "")
        + f", warehouse {settings.warehouse_uri}",
    }[settings.catalog_type]
    if several_writers_safe(settings):
        safety = "safe for several writing processes"
    else:
        safety = (
            "safe for ONE writing process only (run the ingest and maintenance in the same process, or set "
            "ICESTREAM_CATALOG_TYPE=jdbc)"
        )
    return f"catalog {settings.catalog!r} is {settings.catalog_type} ({where}): {safety}"


def ensure_jdbc_catalog(settings: Settings) -> Path:
    """Create the JDBC catalog's SQLite file and tables unless they exist (idempotent, safe to race).

    Args:
        settings: Supplies the catalog file (in the warehouse folder).

    Returns:
        The catalog file.
    """
    path = settings.catalog_file
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, timeout=SQLITE_TIMEOUT_SECONDS)) as connection, connection:
        for statement in JDBC_CATALOG_DDL:
            connection.execute(statement)
    return path


def current_metadata_location(settings: Settings, table: str | None = None) -> str:
    """The current metadata file of a table in the namespace, read from the catalog without Spark.

    The JDBC catalog's row for the table holds it (``iceberg_tables.metadata_location``); the Hadoop
    catalog's ``version-hint.text`` names its version; Glue's table has it as a parameter.

    Args:
        settings: The settings (catalog, warehouse, namespace).
        table: Table name in the namespace (default: the events table).

    Returns:
        The location of the metadata JSON file (a ``file:`` URI, a path, or an ``s3://`` URI).

    Raises:
        ConfigError: If the catalog or the table does not exist yet, or a Hadoop catalog is on S3.
        ServiceUnavailableError: If Glue does not answer or refuses the request.
    """
    namespace = validate_identifier(settings.namespace, "namespace")
    name = validate_identifier(table or settings.table, "table")
    if settings.catalog_type == "jdbc":
        return _jdbc_metadata_location(settings, namespace, name)
    if settings.catalog_type == "glue":
        return _glue_metadata_location(settings, namespace, name)
    if "://" in settings.warehouse:
        raise ConfigError(
            "the metadata file of a Hadoop catalog table on S3 is found through Spark: use "
            "LakeTable(spark, name).inspect.metadata_location(), which asks the catalog."
        )
    folder = Path(settings.warehouse_uri) / namespace / name / "metadata"
    hint = folder / "version-hint.text"
    if not hint.is_file():
        raise ConfigError(f"{hint} not found: create the table first (00_setup or `icestream setup`).")
    return str(folder / f"v{int(hint.read_text().strip())}.metadata.json")


def _jdbc_metadata_location(settings: Settings, namespace: str, name: str) -> str:
    path = settings.catalog_file
    missing = ConfigError(
        f"table {namespace}.{name} is not in the catalog {path}: create it first (00_setup or `icestream setup`)."
    )
    if not path.is_file():
        raise missing
    # Not mode=ro: after a writer was killed mid-commit, only a read-write connection can roll back
    # the journal it left (a read-only one fails with SQLITE_READONLY_ROLLBACK). A SELECT takes no
    # write lock, and the file exists (checked above), so nothing is created.
    with closing(sqlite3.connect(path, timeout=SQLITE_TIMEOUT_SECONDS)) as connection:
        try:
            row = connection.execute(
                "SELECT metadata_location FROM iceberg_tables "
                "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                (settings.catalog, namespace, name),
            ).fetchone()
        except sqlite3.OperationalError:  # no iceberg_tables yet: the catalog was never used
            row = None
    if row is None or not row[0]:
        raise missing
    return str(row[0])


def _glue_metadata_location(settings: Settings, namespace: str, name: str) -> str:
    from botocore.exceptions import BotoCoreError, ClientError

    glue = aws.client(settings, "glue")
    try:
        table = glue.get_table(DatabaseName=namespace, Name=name)["Table"]
    except glue.exceptions.EntityNotFoundException:
        raise ConfigError(
            f"table {namespace}.{name} is not in the Glue catalog: create it first (00_setup or `icestream setup`)."
        ) from None
    except (BotoCoreError, ClientError) as error:
        raise aws.glue_unavailable(settings, f"{namespace}.{name}", error) from None
    location = table.get("Parameters", {}).get("metadata_location")
    if not location:
        raise ConfigError(f"Glue table {namespace}.{name} is not an Iceberg table (no metadata_location parameter).")
    return str(location)
