"""A table's metadata: Iceberg's metadata tables, its properties, and its snapshot ancestry.

Every query uses the metadata tables' real columns on Iceberg 1.10 (``DESCRIBE
lake.<ns>.<table>.<metadata table>``): ``snapshots`` (committed_at, snapshot_id, parent_id,
operation, manifest_list, summary), ``files`` / ``data_files`` (content, file_path, file_format,
spec_id, partition, record_count, file_size_in_bytes ...), ``manifests`` / ``all_manifests``
(content, path, length, partition_spec_id, added_snapshot_id, added/existing/deleted_data_files_count
...), ``partitions`` (partition, spec_id, record_count, file_count, total_data_file_size_in_bytes
...), ``history``, ``refs`` and ``metadata_log_entries`` (timestamp, file, latest_snapshot_id ...).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from icestream.errors import StorageListingError
from icestream.lake.ddl import readable_property
from icestream.lake.statement import Statement
from icestream.lake.summary import BATCH_KEY
from icestream.runtime.handles import jvm as jvm_of
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

    from icestream.lake.table import LakeTable

METADATA_TABLES = ("snapshots", "files", "manifests", "partitions", "metadata_log_entries", "refs", "history")
DATA_CONTENT = 0  # files.content: 0 data, 1 position deletes, 2 equality deletes
FILE_COLUMNS = "content, file_path, file_format, spec_id, partition, record_count, file_size_in_bytes"


# py4j resolves ``jvm.org.apache.iceberg.spark.Spark3Util`` one dotted part at a time, and every
# part that is not a class ("org", "org.apache", ...) is a failed class lookup across all the jars
# on the classpath: about 6 % of the JVM's CPU per ingest batch, measured with JFR. The class is
# looked up once per gateway instead.
_SPARK3UTIL: dict[int, tuple[Any, Any]] = {}


def _spark3util(spark: SparkSession) -> Any:
    gateway = spark.sparkContext._gateway
    known = _SPARK3UTIL.get(id(gateway))
    if known is None or known[0] is not gateway:  # a new session's gateway may reuse an old id
        known = _SPARK3UTIL[id(gateway)] = (gateway, jvm_of(spark).org.apache.iceberg.spark.Spark3Util)
    return known[1]


def load_iceberg_table(spark: SparkSession, name: str) -> Any:
    """Iceberg's Java ``Table`` for a validated name, refreshed: another process may have committed."""
    table = _spark3util(spark).loadIcebergTable(spark._jsparkSession, name)
    table.refresh()
    return table


def ancestry(spark: SparkSession, name: str) -> Iterator[Any]:
    """The table's snapshots from the current one back through its parents: the one ancestry walk.

    It yields Iceberg's own ``org.apache.iceberg.Snapshot`` objects (through py4j:
    ``snapshotId()``, ``parentId()``, ``operation()``, ``summary().get(key)``) one at a time, so a
    walk that stops early (the ingest's own commit, the dedupe index's snapshot, the newest snapshot
    with positions) reads only what it needs, and no query of the whole ``snapshots`` table runs.
    It ends at the first snapshot, or where expiry removed a parent.

    Args:
        spark: The session.
        name: A validated table name (:attr:`icestream.lake.LakeTable.name`).
    """
    iceberg = load_iceberg_table(spark, name)
    snapshot = iceberg.currentSnapshot()
    while snapshot is not None:
        yield snapshot
        parent = snapshot.parentId()
        snapshot = iceberg.snapshot(parent) if parent is not None else None


def partition_label(partition: Mapping[str, Any] | None) -> str:
    """A readable partition: ``event_ts_hour=498677`` becomes ``2026-11-21 05:00``.

    Args:
        partition: The ``partition`` struct of a metadata table row, as a dict.

    Returns:
        The label (``unpartitioned`` for an empty struct).
    """
    if not partition:
        return "unpartitioned"
    labels = []
    for name, value in partition.items():
        if name.endswith("_hour") and value is not None:
            labels.append(datetime.fromtimestamp(int(value) * 3600, UTC).strftime("%Y-%m-%d %H:%M"))
        elif name.endswith("_day") and value is not None:
            labels.append(str(value)[:10])
        else:
            labels.append(f"{name}={value}")
    return ", ".join(labels)


def _exact_ids(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Snapshot ids selected as text → nullable ``Int64``: a null would make pandas use float64,
    which cannot hold a 64-bit id exactly."""
    import pandas as pd

    frame[column] = pd.array([None if pd.isna(value) else int(value) for value in frame[column]], dtype="Int64")
    return frame


def _as_dict(value: Any) -> dict[str, Any]:
    if value is None or value != value:  # NaN: pandas' null (an unpartitioned table's column)
        return {}
    if hasattr(value, "asDict"):
        return value.asDict()
    return dict(value)


def name_of(path: str) -> str:
    """The file name of a location (``.../metadata/v3.metadata.json`` → ``v3.metadata.json``)."""
    return path.rsplit("/", 1)[-1]


def _list_sizes(spark: SparkSession, folder: str) -> dict[str, int]:
    """File name → size of the files in one folder, through the JVM's Hadoop FileSystem.

    Raises:
        StorageListingError: If the folder cannot be listed (on an ``s3://`` warehouse without an S3
            FileSystem: "No FileSystem for scheme s3"); callers show the reason instead of a size.
    """
    jvm = jvm_of(spark)
    path = jvm.org.apache.hadoop.fs.Path(folder)
    try:
        statuses = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).listStatus(path)
    except Exception as error:  # noqa: BLE001 - py4j wraps any Java I/O error
        reason = str(getattr(error, "java_exception", None) or error).strip().splitlines()[0]
        raise StorageListingError(
            f"cannot list {folder}: {reason}; give Spark a FileSystem for this scheme (e.g. s3a with hadoop-aws)."
        ) from None
    return {status.getPath().getName(): int(status.getLen()) for status in statuses}


class Inspect:
    """Read a table's metadata (``table.inspect``); every query is recorded in ``table.statements``."""

    def __init__(self, table: LakeTable) -> None:
        self._table = table

    def _frame(self, sql: str, **args: Any) -> pd.DataFrame:
        return self._table.run(Statement(sql, args)).toPandas()

    def snapshots(self) -> pd.DataFrame:
        """The ``snapshots`` metadata table with the summary fields worth reading, oldest first.

        Returns:
            ``committed_at``, ``snapshot_id``, ``parent_id``, ``operation``, ``added_records``,
            ``total_records``, ``added_data_files``, ``total_data_files`` and ``batch_id`` (the
            ingest's batch id, null for snapshots other writers made).
        """
        frame = self._frame(
            f"""
            SELECT committed_at, snapshot_id, CAST(parent_id AS STRING) AS parent_id, operation,
                   CAST(summary['added-records'] AS BIGINT) AS added_records,
                   CAST(summary['total-records'] AS BIGINT) AS total_records,
                   CAST(summary['added-data-files'] AS BIGINT) AS added_data_files,
                   CAST(summary['total-data-files'] AS BIGINT) AS total_data_files,
                   CAST(summary['{BATCH_KEY}'] AS BIGINT) AS batch_id
            FROM {self._table.name}.snapshots
            ORDER BY committed_at, snapshot_id
            """
        )
        # Counts stay integers where some snapshots lack them (a null would turn the column to float).
        for column in ("added_records", "total_records", "added_data_files", "total_data_files", "batch_id"):
            frame = _exact_ids(frame, column)
        return _exact_ids(frame, "parent_id")

    def files(self) -> pd.DataFrame:
        """Data and delete files of the current snapshot (the ``files`` metadata table).

        Returns:
            ``content`` (:data:`DATA_CONTENT` for data, 1 position deletes, 2 equality deletes),
            ``file_path``, ``file_format``, ``spec_id``, ``partition`` (a readable label),
            ``record_count``, ``file_size_in_bytes``; by path.
        """
        return self._files("files")

    def data_files(self) -> pd.DataFrame:
        """Data files of the current snapshot (``data_files``): the columns of :meth:`files`."""
        return self._files("data_files")

    def _files(self, metadata_table: str) -> pd.DataFrame:
        columns = FILE_COLUMNS.replace("partition", self._partition())
        frame = self._frame(f"SELECT {columns} FROM {self._table.name}.{metadata_table} ORDER BY file_path")
        frame["partition"] = [partition_label(_as_dict(value)) for value in frame["partition"]]
        return frame

    def _partition(self, prefix: str = "") -> str:
        """The metadata tables' ``partition`` column, or a null in its place: an unpartitioned table's have none."""
        spec = load_iceberg_table(self._table.spark, self._table.name).spec()
        return "CAST(NULL AS STRING) AS partition" if spec.isUnpartitioned() else f"{prefix}partition AS partition"

    def file_bounds(self, column: str = "event_ts") -> pd.DataFrame:
        """Each data file's lowest and highest value of ``column``: what lets a scan skip a file.

        Iceberg keeps them per file in the manifests (the ``files`` table's ``lower_bounds`` and
        ``upper_bounds``, binary values keyed by field id); ``readable_metrics`` decodes them. A scan
        whose filter cannot match inside ``[lower, upper]`` never opens the file.

        Returns:
            ``file`` (name), ``partition`` (a readable label), ``record_count``,
            ``file_size_in_bytes``, ``lower_bound``, ``upper_bound``, ``lower_bounds_raw`` (the stored
            bytes, hex); by ``lower_bound``.
        """
        name = validate_identifier(column, "column")
        field_id = int(load_iceberg_table(self._table.spark, self._table.name).schema().findField(name).fieldId())
        frame = self._frame(
            f"""
            SELECT file_path, {self._partition()}, record_count, file_size_in_bytes,
                   readable_metrics.{name}.lower_bound AS lower_bound,
                   readable_metrics.{name}.upper_bound AS upper_bound,
                   hex(lower_bounds[{field_id}]) AS lower_bounds_raw
            FROM {self._table.name}.data_files
            ORDER BY lower_bound, file_path
            """
        )
        frame.insert(0, "file", [name_of(path) for path in frame.pop("file_path")])
        frame["partition"] = [partition_label(_as_dict(value)) for value in frame["partition"]]
        return frame

    def entries(self) -> pd.DataFrame:
        """The current snapshot's manifest entries (the ``entries`` table): each file, and which
        snapshot added it.

        Returns:
            ``status`` (``ADDED`` by the snapshot that wrote the manifest, ``EXISTING`` carried
            over, ``DELETED``), ``snapshot_id``, ``sequence_number``, ``file``, ``partition``,
            ``record_count``; newest first.
        """
        frame = self._frame(
            f"""
            SELECT CASE status WHEN 0 THEN 'EXISTING' WHEN 1 THEN 'ADDED' ELSE 'DELETED' END AS status,
                   snapshot_id, sequence_number, data_file.file_path AS file_path,
                   {self._partition("data_file.")}, data_file.record_count AS record_count
            FROM {self._table.name}.entries
            ORDER BY sequence_number DESC, file_path
            """
        )
        frame["file_path"] = [name_of(path) for path in frame["file_path"]]
        frame["partition"] = [partition_label(_as_dict(value)) for value in frame["partition"]]
        return frame.rename(columns={"file_path": "file"})

    def file_counts(self) -> pd.DataFrame:
        """Data files the current snapshot reads (``data_files``) against those every kept snapshot
        references (``all_data_files``): what time travel keeps on storage.

        Returns:
            One row: ``current_data_files``, ``all_data_files``, ``snapshots``.
        """
        name = self._table.name
        return self._frame(
            f"""
            SELECT (SELECT count(*) FROM {name}.data_files) AS current_data_files,
                   (SELECT count(DISTINCT file_path) FROM {name}.all_data_files) AS all_data_files,
                   (SELECT count(*) FROM {name}.snapshots) AS snapshots
            """
        )

    def manifests(self) -> pd.DataFrame:
        """The manifests of the current snapshot (the ``manifests`` metadata table).

        Returns:
            ``content``, ``path``, ``length`` (bytes), ``partition_spec_id``, ``added_snapshot_id``,
            ``added_data_files_count``, ``existing_data_files_count``, ``deleted_data_files_count``,
            ``added_delete_files_count``, ``existing_delete_files_count``.
        """
        return self._frame(
            f"""
            SELECT content, path, length, partition_spec_id, added_snapshot_id, added_data_files_count,
                   existing_data_files_count, deleted_data_files_count, added_delete_files_count,
                   existing_delete_files_count
            FROM {self._table.name}.manifests
            """
        )

    def partitions(self) -> pd.DataFrame:
        """The ``partitions`` metadata table, one row per partition, oldest first.

        Returns:
            ``partition`` (a readable label), ``spec_id``, ``record_count``, ``file_count``,
            ``total_data_file_size_in_bytes``, ``position_delete_file_count``,
            ``equality_delete_file_count``, ``last_updated_at``.
        """
        frame = self._frame(
            f"""
            SELECT partition, spec_id, record_count, file_count, total_data_file_size_in_bytes,
                   position_delete_file_count, equality_delete_file_count, last_updated_at
            FROM {self._table.name}.partitions
            """
        )
        frame["partition"] = [partition_label(_as_dict(value)) for value in frame["partition"]]
        return frame.sort_values("partition").reset_index(drop=True)

    def history(self) -> pd.DataFrame:
        """Which snapshot was current when (a rollback adds a row).

        Returns:
            ``made_current_at``, ``snapshot_id``, ``parent_id``, ``is_current_ancestor``.
        """
        frame = self._frame(
            "SELECT made_current_at, snapshot_id, CAST(parent_id AS STRING) AS parent_id, is_current_ancestor "
            f"FROM {self._table.name}.history ORDER BY made_current_at"
        )
        return _exact_ids(frame, "parent_id")

    def refs(self) -> pd.DataFrame:
        """The table's branches and tags (``name``, ``type``, ``snapshot_id``)."""
        return self._frame(f"SELECT name, type, snapshot_id FROM {self._table.name}.refs ORDER BY type, name")

    def current_snapshot_id(self, branch: str = "main") -> int | None:
        """The snapshot a branch points at (``main``: the table's current snapshot), None if absent."""
        row = self._table.run(
            Statement(f"SELECT snapshot_id FROM {self._table.name}.refs WHERE name = :branch", {"branch": branch})
        ).first()
        return None if row is None else int(row.snapshot_id)

    def metadata_log(self) -> pd.DataFrame:
        """The table's metadata files, oldest first (``metadata_log_entries``).

        Returns:
            ``timestamp``, ``file``, ``latest_snapshot_id``, ``latest_schema_id``,
            ``latest_sequence_number``.
        """
        frame = self._frame(
            "SELECT timestamp, file, CAST(latest_snapshot_id AS STRING) AS latest_snapshot_id, latest_schema_id, "
            f"latest_sequence_number FROM {self._table.name}.metadata_log_entries ORDER BY timestamp"
        )
        for column in ("latest_schema_id", "latest_sequence_number"):  # null before the first snapshot
            frame = _exact_ids(frame, column)
        return _exact_ids(frame, "latest_snapshot_id")

    def metadata_files(self) -> pd.DataFrame:
        """Every metadata file the table references, with its size: the table's metadata footprint.

        Metadata JSON files come from ``metadata_log_entries``, manifest lists from ``snapshots``,
        manifests (with their ``length``) from ``all_manifests``. JSON files and manifest lists have
        no size column, so their sizes come from one listing of the metadata folder through Hadoop's
        FileSystem (the same code path for a local folder and for S3A).

        Returns:
            ``kind`` (``metadata.json``, ``previous metadata.json``, ``manifest list`` or
            ``manifest``), ``path``, ``bytes`` and ``unavailable``: the listing's error when the
            folder could not be listed (``bytes`` is then missing), else None. A file missing from
            a listing that worked was deleted meanwhile by a commit; its ``bytes`` is missing too.
            Previous metadata files are history only; commits delete the oldest beyond
            ``write.metadata.previous-versions-max``.
        """
        import pandas as pd

        name = self._table.name
        json_files = list(self.metadata_log()["file"])
        lists = self._frame(f"SELECT manifest_list FROM {name}.snapshots")["manifest_list"]
        manifests = self._frame(f"SELECT DISTINCT path, length FROM {name}.all_manifests")
        sizes: dict[str, int] = {}
        listing_error = None
        if json_files:
            try:
                sizes = _list_sizes(self._table.spark, json_files[-1].rsplit("/", 1)[0])
            except StorageListingError as error:
                listing_error = str(error)
        newest = len(json_files) - 1
        listed = [
            ("metadata.json" if index == newest else "previous metadata.json", path)
            for index, path in enumerate(json_files)
        ]
        listed += [("manifest list", path) for path in lists if path]
        rows = [(kind, path, sizes.get(name_of(path)), listing_error) for kind, path in listed]
        sized = zip(manifests["path"], manifests["length"], strict=True)
        rows += [("manifest", path, length, None) for path, length in sized]
        return pd.DataFrame(rows, columns=["kind", "path", "bytes", "unavailable"])

    def metadata_columns(self, names: tuple[str, ...] = METADATA_TABLES) -> pd.DataFrame:
        """The columns of Iceberg's metadata tables, as ``DESCRIBE`` reports them for this table.

        Returns:
            One row per metadata table: ``metadata table``, ``columns`` (comma-separated, in order).
        """
        import pandas as pd

        rows = []
        for metadata_table in names:
            validate_identifier(metadata_table, "metadata table")
            described = self._frame(f"DESCRIBE {self._table.name}.{metadata_table}")
            columns = [name for name in described["col_name"] if name and not name.startswith("#")]
            rows.append({"metadata table": metadata_table, "columns": ", ".join(columns)})
        return pd.DataFrame(rows)

    def properties(self, readable: bool = False) -> dict[str, str]:
        """The table's properties (``SHOW TBLPROPERTIES``).

        Args:
            readable: Each value as a reader expects it (:func:`~icestream.lake.ddl.readable_property`):
                a creation time kept as epoch seconds shown as UTC, ``none`` as nothing committed yet.
        """
        rows = self._table.run(Statement(f"SHOW TBLPROPERTIES {self._table.name}")).collect()
        return {row.key: readable_property(row.key, row.value) if readable else row.value for row in rows}

    def metadata_location(self) -> tuple[str, int | None]:
        """The current metadata file and snapshot id, from Iceberg's Java API (works for any catalog).

        This is where another engine (DuckDB, Athena) starts reading the table.

        Returns:
            ``(metadata file location, current snapshot id or None for an empty table)``.
        """
        current = load_iceberg_table(self._table.spark, self._table.name).operations().current()
        snapshot = current.currentSnapshot()
        return str(current.metadataFileLocation()), None if snapshot is None else int(snapshot.snapshotId())

    def ancestry(self) -> Iterator[Any]:
        """The snapshots from the current one back (see :func:`ancestry`)."""
        return ancestry(self._table.spark, self._table.name)
