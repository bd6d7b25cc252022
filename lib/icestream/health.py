"""Table health from Iceberg's metadata tables, and maintenance through Iceberg's procedures.

Every query here is Spark SQL for Iceberg 1.10 and uses the metadata tables' real columns
(``DESCRIBE lake.<ns>.<table>.<metadata table>``): ``snapshots`` (committed_at, snapshot_id,
parent_id, operation, manifest_list, summary), ``files`` (content, file_path, file_format, spec_id,
partition, record_count, file_size_in_bytes ...), ``manifests`` / ``all_manifests`` (content, path,
length, partition_spec_id, added_snapshot_id, added/existing/deleted_data_files_count ...),
``partitions`` (partition, spec_id, record_count, file_count, total_data_file_size_in_bytes,
position_delete_file_count, equality_delete_file_count ...) and ``metadata_log_entries`` (timestamp,
file, latest_snapshot_id ...).

What "healthy" means is relative to what compaction can achieve. A streaming ingest commits a file
per partition every few seconds, so an hour partition ends up with hundreds of files of a few
kilobytes. Iceberg's ``binpack`` merges files below 75 % of the target size
(``write.target-file-size-bytes``) when a partition holds several, so a *small file* here is one below
that size that shares its partition with another data file: something compaction could merge. The
average file size is compared with what the data allows, ``min(target, partition size)`` per
partition, because a local demo's whole hour is far below 128 MiB and would otherwise always warn.

Maintenance never disturbs the ingest's committed position (``icestream.ingest.positions``): binpack
and manifest rewrites add ``replace`` snapshots that the position search skips, and
:func:`retain_for_positions` tells snapshot expiry how many snapshots to keep so that the newest one
carrying the positions survives. All procedures are safe while the ingest runs: Iceberg retries
conflicting commits (``commit.retry.num-retries`` is 10 on these tables) and a rewrite that only
replaces existing files does not conflict with appends.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from icestream.config import validate_identifier
from icestream.errors import ConfigError
from icestream.ingest.positions import POSITIONS_KEY, STREAM_KEY
from icestream.tables import qualified_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TARGET_FILE_SIZE_PROPERTY = "write.target-file-size-bytes"
ICEBERG_DEFAULT_TARGET = 512 * 1024 * 1024  # Iceberg's default when the table does not set one
SMALL_FILE_FRACTION = 0.75  # binpack's default min-file-size-bytes is 75 % of the target
# Iceberg's remove_orphan_files procedure refuses anything younger: a writer that is still
# committing has files on storage that no metadata references yet, and they would look orphaned.
MIN_ORPHAN_AGE = timedelta(hours=24)
DATA = 0  # files.content: 0 data, 1 position deletes, 2 equality deletes

_OPTION_KEY = re.compile(r"^[a-z][a-z0-9.-]{0,99}$")
_OPTION_VALUE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_SORT_ITEM = re.compile(r"^\s*(\w+)(?:\s+(ASC|DESC))?(?:\s+NULLS\s+(FIRST|LAST))?\s*$", re.IGNORECASE)
_STRATEGIES = ("binpack", "sort")


def _table(table: str) -> str:
    return qualified_name(*table.split("."))


# -- metadata tables ------------------------------------------------------------------------------
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


METADATA_TABLES = ("snapshots", "files", "manifests", "partitions", "metadata_log_entries", "refs", "history")


def metadata_columns(spark: SparkSession, table: str, names: tuple[str, ...] = METADATA_TABLES) -> pd.DataFrame:
    """The columns of Iceberg's metadata tables, as ``DESCRIBE`` reports them for this table.

    Args:
        spark: The session.
        table: Qualified table name.
        names: Metadata tables to describe.

    Returns:
        One row per metadata table: ``metadata table``, ``columns`` (comma-separated, in order).
    """
    rows = []
    for name in names:
        described = spark.sql(f"DESCRIBE {_table(table)}.{validate_identifier(name, 'metadata table')}").collect()
        columns = [row.col_name for row in described if row.col_name and not row.col_name.startswith("#")]
        rows.append({"metadata table": name, "columns": ", ".join(columns)})
    return pd.DataFrame(rows)


def snapshots(spark: SparkSession, table: str) -> pd.DataFrame:
    """The ``snapshots`` metadata table with the summary fields that matter for health.

    Returns:
        One row per snapshot, oldest first: ``committed_at``, ``snapshot_id``, ``parent_id``,
        ``operation``, ``added_data_files``, ``added_records``, ``total_data_files``, ``total_records``,
        ``ingest_batch`` (the ingest's batch id, if the ingest wrote it).
    """
    return spark.sql(
        "SELECT committed_at, snapshot_id, parent_id, operation, "
        "CAST(summary['added-data-files'] AS BIGINT) AS added_data_files, "
        "CAST(summary['added-records'] AS BIGINT) AS added_records, "
        "CAST(summary['total-data-files'] AS BIGINT) AS total_data_files, "
        "CAST(summary['total-records'] AS BIGINT) AS total_records, "
        "CAST(summary['icestream.batch-id'] AS BIGINT) AS ingest_batch "
        f"FROM {_table(table)}.snapshots ORDER BY committed_at"
    ).toPandas()


def data_files(spark: SparkSession, table: str) -> pd.DataFrame:
    """The ``files`` metadata table (data and delete files of the current snapshot).

    Returns:
        ``content`` (0 data, 1 position deletes, 2 equality deletes), ``file_path``, ``file_format``,
        ``spec_id``, ``partition`` (a readable label), ``record_count``, ``file_size_in_bytes``.
    """
    frame = spark.sql(
        "SELECT content, file_path, file_format, spec_id, partition, record_count, file_size_in_bytes "
        f"FROM {_table(table)}.files"
    ).toPandas()
    frame["partition"] = [partition_label(_as_dict(value)) for value in frame["partition"]]
    return frame


def manifests(spark: SparkSession, table: str) -> pd.DataFrame:
    """The ``manifests`` metadata table (manifests of the current snapshot).

    Returns:
        ``content``, ``path``, ``length`` (bytes), ``partition_spec_id``, ``added_snapshot_id``,
        ``added_data_files_count``, ``existing_data_files_count``, ``deleted_data_files_count``,
        ``added_delete_files_count``, ``existing_delete_files_count``.
    """
    return spark.sql(
        "SELECT content, path, length, partition_spec_id, added_snapshot_id, added_data_files_count, "
        "existing_data_files_count, deleted_data_files_count, added_delete_files_count, existing_delete_files_count "
        f"FROM {_table(table)}.manifests"
    ).toPandas()


def partitions(spark: SparkSession, table: str) -> pd.DataFrame:
    """The ``partitions`` metadata table, one row per partition, oldest first.

    Returns:
        ``partition`` (a readable label), ``spec_id``, ``record_count``, ``file_count``,
        ``total_data_file_size_in_bytes``, ``position_delete_file_count``, ``equality_delete_file_count``,
        ``last_updated_at``.
    """
    frame = spark.sql(
        "SELECT partition, spec_id, record_count, file_count, total_data_file_size_in_bytes, "
        "position_delete_file_count, equality_delete_file_count, last_updated_at "
        f"FROM {_table(table)}.partitions"
    ).toPandas()
    frame["partition"] = [partition_label(_as_dict(value)) for value in frame["partition"]]
    return frame.sort_values("partition").reset_index(drop=True)


def _as_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "asDict"):
        return value.asDict()
    return dict(value)


def metadata_files(spark: SparkSession, table: str) -> pd.DataFrame:
    """Every metadata file the table references, with its size: the table's metadata footprint.

    Metadata JSON files come from ``metadata_log_entries``, manifest lists from ``snapshots``, and
    manifests (with their ``length``) from ``all_manifests``. JSON files and manifest lists have no
    size column, so their sizes come from one listing of the metadata folder through Hadoop's
    FileSystem (the same code path for a local folder and for S3A).

    Returns:
        ``kind`` (``metadata.json``, ``previous metadata.json``, ``manifest list`` or ``manifest``),
        ``path``, ``bytes`` (missing when the file could not be listed). Previous metadata files are
        history only (planning reads the current one); commits delete the oldest beyond
        ``write.metadata.previous-versions-max``.
    """
    name = _table(table)
    json_files = [
        row.file for row in spark.sql(f"SELECT file FROM {name}.metadata_log_entries ORDER BY timestamp").collect()
    ]
    lists = [row.manifest_list for row in spark.sql(f"SELECT manifest_list FROM {name}.snapshots").collect()]
    manifest_rows = spark.sql(f"SELECT DISTINCT path, length FROM {name}.all_manifests").collect()
    sizes = _list_sizes(spark, json_files[-1].rsplit("/", 1)[0]) if json_files else {}
    rows = [
        ("metadata.json" if index == len(json_files) - 1 else "previous metadata.json", path, sizes.get(name_of(path)))
        for index, path in enumerate(json_files)
    ]
    rows += [("manifest list", path, sizes.get(name_of(path))) for path in lists if path]
    rows += [("manifest", row.path, row.length) for row in manifest_rows]
    return pd.DataFrame(rows, columns=["kind", "path", "bytes"])


def name_of(path: str) -> str:
    """The file name of a location (``.../metadata/v3.metadata.json`` → ``v3.metadata.json``)."""
    return path.rsplit("/", 1)[-1]


def _list_sizes(spark: SparkSession, folder: str) -> dict[str, int]:
    """File name → size of the files in one folder, through the JVM's Hadoop FileSystem."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(folder)
    try:
        statuses = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).listStatus(path)
    except Exception:  # noqa: BLE001 - py4j wraps any Java I/O error; sizes are then unknown
        return {}
    return {status.getPath().getName(): int(status.getLen()) for status in statuses}


def table_property(spark: SparkSession, table: str, key: str) -> str | None:
    """One table property, or None when it is not set."""
    rows = spark.sql(f"SHOW TBLPROPERTIES {_table(table)}").collect()
    return next((row.value for row in rows if row.key == key), None)


# -- stats and the health report ------------------------------------------------------------------
@dataclass(frozen=True)
class TableStats:
    """The numbers the health report judges, collected at one moment."""

    records: int
    data_files: int
    delete_files: int
    data_bytes: int
    partitions: int
    max_files_per_partition: int
    small_files: int  # below the small-file size and sharing a partition with another data file
    average_file_bytes: float
    achievable_average_bytes: float  # with one file per min(target, partition size)
    target_file_bytes: int
    snapshots: int
    manifests: int
    metadata_bytes: int  # current metadata.json, manifest lists and manifests of the kept snapshots
    previous_metadata_bytes: int  # older metadata.json versions (history, bounded by the table properties)

    def table(self) -> dict[str, float | int]:
        """The numbers as one row for a pandas table (sizes in MiB)."""
        values: dict[str, float | int] = asdict(self)
        for key in (
            "data_bytes",
            "average_file_bytes",
            "achievable_average_bytes",
            "target_file_bytes",
            "metadata_bytes",
        ):
            values[key.replace("bytes", "MiB")] = round(values.pop(key) / 2**20, 3)
        return values


def collect_stats(spark: SparkSession, table: str, small_file_bytes: int | None = None) -> TableStats:
    """Collect the table's health numbers from its metadata tables.

    Args:
        spark: The session.
        table: Qualified table name.
        small_file_bytes: Files below this are small (default 75 % of the table's target file size).

    Returns:
        The numbers.
    """
    target = int(table_property(spark, table, TARGET_FILE_SIZE_PROPERTY) or ICEBERG_DEFAULT_TARGET)
    small_file_bytes = small_file_bytes or int(target * SMALL_FILE_FRACTION)
    files = data_files(spark, table)
    data = files[files["content"] == DATA]
    per_partition = data.groupby("partition").agg(files=("file_path", "size"), bytes=("file_size_in_bytes", "sum"))
    shared = data["partition"].map(per_partition["files"]) > 1
    achievable_files = int(sum(max(1, math.ceil(b / target)) for b in per_partition["bytes"]))
    data_bytes = int(data["file_size_in_bytes"].sum())
    meta = metadata_files(spark, table)
    return TableStats(
        records=int(data["record_count"].sum()),
        data_files=len(data),
        delete_files=int((files["content"] != DATA).sum()),
        data_bytes=data_bytes,
        partitions=len(per_partition),
        max_files_per_partition=int(per_partition["files"].max()) if len(per_partition) else 0,
        small_files=int(((data["file_size_in_bytes"] < small_file_bytes) & shared).sum()),
        average_file_bytes=data_bytes / len(data) if len(data) else 0.0,
        achievable_average_bytes=data_bytes / achievable_files if achievable_files else 0.0,
        target_file_bytes=target,
        snapshots=int(spark.sql(f"SELECT count(*) FROM {_table(table)}.snapshots").first()[0]),
        manifests=int(spark.sql(f"SELECT count(*) FROM {_table(table)}.manifests").first()[0]),
        metadata_bytes=int(meta.loc[meta["kind"] != "previous metadata.json", "bytes"].fillna(0).sum()),
        previous_metadata_bytes=int(meta.loc[meta["kind"] == "previous metadata.json", "bytes"].fillna(0).sum()),
    )


@dataclass(frozen=True)
class HealthThresholds:
    """Limits of the health report; a value beyond its limit is a WARN.

    Attributes:
        max_small_file_ratio: Share of data files that are small and mergeable.
        min_average_size_ratio: Average file size over the achievable average.
        max_files_per_partition: Data files in the fullest partition.
        max_snapshots: Snapshots kept (each is a time-travel point and metadata to read).
        max_metadata_ratio: Metadata bytes over data bytes.
        max_delete_file_ratio: Delete files over data files (merge-on-read debt).
    """

    max_small_file_ratio: float = 0.2
    min_average_size_ratio: float = 0.5
    max_files_per_partition: int = 10
    max_snapshots: int = 100
    max_metadata_ratio: float = 0.5
    max_delete_file_ratio: float = 0.1


def health_report(stats: TableStats, thresholds: HealthThresholds = HealthThresholds()) -> pd.DataFrame:
    """Judge the numbers: one line per check, OK or WARN, with the value and the limit.

    Args:
        stats: From :func:`collect_stats`.
        thresholds: The limits.

    Returns:
        Columns ``check``, ``value``, ``limit``, ``status``, ``detail``.
    """
    files = max(stats.data_files, 1)
    size_ratio = stats.average_file_bytes / stats.achievable_average_bytes if stats.achievable_average_bytes else 1.0
    metadata_ratio = stats.metadata_bytes / stats.data_bytes if stats.data_bytes else 0.0
    lines = [
        ("small-file ratio", stats.small_files / files, thresholds.max_small_file_ratio, "max",
         f"{stats.small_files} of {stats.data_files} data files are small and share a partition"),
        ("average file size / achievable", size_ratio, thresholds.min_average_size_ratio, "min",
         f"average {stats.average_file_bytes / 2**20:.3f} MiB; achievable {stats.achievable_average_bytes / 2**20:.3f} "
         f"MiB (target {stats.target_file_bytes / 2**20:.0f} MiB)"),
        ("files in the fullest partition", stats.max_files_per_partition, thresholds.max_files_per_partition, "max",
         f"{stats.data_files} data files over {stats.partitions} partitions"),
        ("snapshots", stats.snapshots, thresholds.max_snapshots, "max", "each one is kept metadata"),
        ("metadata bytes / data bytes", metadata_ratio, thresholds.max_metadata_ratio, "max",
         f"{stats.metadata_bytes / 2**20:.2f} MiB of metadata for {stats.data_bytes / 2**20:.2f} MiB of data, "
         f"{stats.manifests} manifests; {stats.previous_metadata_bytes / 2**20:.2f} MiB of older metadata.json"),
        ("delete files / data files", stats.delete_files / files, thresholds.max_delete_file_ratio, "max",
         f"{stats.delete_files} delete files"),
    ]  # fmt: skip
    rows = []
    for check, value, limit, kind, detail in lines:
        ok = value <= limit if kind == "max" else value >= limit
        rows.append(
            {
                "check": check,
                "value": round(float(value), 3),
                "limit": f"{'≤' if kind == 'max' else '≥'} {limit:g}",
                "status": "OK" if ok else "WARN",
                "detail": detail,
            }
        )
    return pd.DataFrame(rows)


def content_fingerprint(spark: SparkSession, table: str) -> dict[str, int]:
    """Row count and an order-independent hash of the event ids: equal before and after maintenance.

    Returns:
        ``{"rows": n, "event_id_hash": sum of xxhash64(event_id)}``.
    """
    row = spark.sql(
        f"SELECT count(*) AS rows, coalesce(sum(CAST(xxhash64(event_id) AS DECIMAL(38, 0))), 0) AS event_id_hash "
        f"FROM {_table(table)}"
    ).first()
    return {"rows": int(row.rows), "event_id_hash": int(row.event_id_hash)}


# -- maintenance ----------------------------------------------------------------------------------
def _procedure_target(table: str) -> tuple[str, str]:
    """``lake.ns.t`` → (``lake``, ``ns.t``): the catalog that runs the procedure and its table argument."""
    catalog, *rest = _table(table).split(".")
    if not rest:
        raise ConfigError(f"table {table!r}: give a qualified name such as lake.streaming_analytics.user_events.")
    return catalog, ".".join(rest)


def timestamp_literal(moment: datetime) -> str:
    """A Spark SQL ``TIMESTAMP`` literal in UTC (procedure arguments must be literals).

    Raises:
        ConfigError: If ``moment`` is naive (its time zone would be a guess).
    """
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise ConfigError(f"{moment!r}: give a timezone-aware datetime, e.g. datetime.now(UTC).")
    return f"TIMESTAMP '{moment.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S')}+00:00'"


def sort_order_literal(sort_order: str) -> str:
    """Validate ``"event_type ASC, event_ts ASC NULLS LAST"`` and return it normalised.

    Raises:
        ConfigError: If an item is not ``column [ASC|DESC] [NULLS FIRST|LAST]``.
    """
    items = []
    for item in sort_order.split(","):
        match = _SORT_ITEM.fullmatch(item)
        if not match:
            raise ConfigError(f"sort_order item {item!r}: write column [ASC|DESC] [NULLS FIRST|LAST].")
        column = validate_column(match.group(1))
        direction = (match.group(2) or "ASC").upper()
        nulls = f" NULLS {match.group(3).upper()}" if match.group(3) else ""
        items.append(f"{column} {direction}{nulls}")
    return ", ".join(items)


def validate_column(name: str) -> str:
    """A column name that may appear in SQL text (same rule as every identifier)."""
    return validate_identifier(name, "column")


def _options_literal(options: Mapping[str, str | int]) -> str:
    pairs = []
    for key, value in options.items():
        text = str(value)
        if not _OPTION_KEY.fullmatch(key) or not _OPTION_VALUE.fullmatch(text):
            raise ConfigError(f"rewrite option {key!r}={text!r}: keys are like min-input-files, values plain tokens.")
        pairs.append(f"'{key}', '{text}'")
    return f"map({', '.join(pairs)})"


def _call(spark: SparkSession, catalog: str, procedure: str, arguments: list[str]) -> pd.DataFrame:
    return spark.sql(f"CALL {catalog}.system.{procedure}({', '.join(arguments)})").toPandas()


def rewrite_data_files(
    spark: SparkSession,
    table: str,
    strategy: str = "binpack",
    sort_order: str | None = None,
    options: Mapping[str, str | int] | None = None,
    before: datetime | None = None,
) -> dict[str, int]:
    """Compact data files with ``CALL <catalog>.system.rewrite_data_files``.

    Args:
        spark: The session.
        table: Qualified table name.
        strategy: ``binpack`` (merge small files) or ``sort`` (merge and sort by ``sort_order``).
        sort_order: For ``sort``, e.g. ``event_type ASC, event_ts ASC``.
        options: Procedure options, e.g. ``{"min-input-files": 2}``.
        before: Only rewrite rows with ``event_ts`` before this (closed hours, not the one being written).

    Returns:
        The procedure's counts: ``rewritten_data_files_count``, ``added_data_files_count``,
        ``rewritten_bytes_count``, ``failed_data_files_count``, ``removed_delete_files_count``.

    Raises:
        ConfigError: If the strategy, sort order or options are invalid.
    """
    if strategy not in _STRATEGIES:
        raise ConfigError(f"strategy {strategy!r}: choose one of {', '.join(_STRATEGIES)}.")
    if strategy == "sort" and not sort_order:
        raise ConfigError("strategy 'sort' needs a sort_order such as 'event_type ASC, event_ts ASC'.")
    catalog, target = _procedure_target(table)
    arguments = [f"table => '{target}'", f"strategy => '{strategy}'"]
    if strategy == "sort":
        arguments.append(f"sort_order => '{sort_order_literal(sort_order or '')}'")
    if options:
        arguments.append(f"options => {_options_literal(options)}")
    if before is not None:
        # The predicate is a string argument parsed by Spark; double quotes delimit it.
        arguments.append(f'where => "event_ts < {timestamp_literal(before)}"')
    result = _call(spark, catalog, "rewrite_data_files", arguments)
    return {column: int(result[column].iloc[0]) for column in result.columns}


def rewrite_manifests(spark: SparkSession, table: str) -> dict[str, int]:
    """Regroup manifests by partition with ``CALL <catalog>.system.rewrite_manifests``.

    Returns:
        ``rewritten_manifests_count`` and ``added_manifests_count``.
    """
    catalog, target = _procedure_target(table)
    result = _call(spark, catalog, "rewrite_manifests", [f"table => '{target}'"])
    return {column: int(result[column].iloc[0]) for column in result.columns}


def retain_for_positions(spark: SparkSession, table: str, stream_name: str) -> int:
    """How many of the newest ancestors to keep so that the one carrying the stream's positions survives.

    The ingest finds its position in the newest ancestor snapshot whose summary has it; maintenance
    snapshots (``replace``) carry none. Keeping that ancestor keeps ``load_committed`` answering from
    the snapshot, not from a derivation over the rows.

    Args:
        spark: The session.
        table: Qualified table name.
        stream_name: The stream whose positions must survive.

    Returns:
        The number of snapshots from the current one back to that snapshot, inclusive (1 when no
        snapshot carries positions).
    """
    name = _table(table)
    current = spark.sql(f"SELECT snapshot_id FROM {name}.refs WHERE name = 'main'").first()
    if current is None:
        return 1
    rows = spark.sql(
        f"SELECT snapshot_id, parent_id, summary['{STREAM_KEY}'] AS stream, summary['{POSITIONS_KEY}'] AS positions "
        f"FROM {name}.snapshots"
    ).collect()
    by_id = {row.snapshot_id: row for row in rows}
    snapshot_id, depth = current.snapshot_id, 0
    while snapshot_id in by_id:
        depth += 1
        row = by_id[snapshot_id]
        if row.positions is not None and row.stream == stream_name:
            return depth
        snapshot_id = row.parent_id
    return 1


def expire_snapshots(spark: SparkSession, table: str, older_than: datetime, retain_last: int = 1) -> dict[str, int]:
    """Expire old snapshots and delete the files only they referenced (``expire_snapshots``).

    Args:
        spark: The session.
        table: Qualified table name.
        older_than: Snapshots committed before this may expire.
        retain_last: Ancestors of the current snapshot kept regardless of age (at least 1).

    Returns:
        The procedure's counts (``deleted_data_files_count``, ``deleted_manifest_files_count``,
        ``deleted_manifest_lists_count`` ...).

    Raises:
        ConfigError: If ``retain_last`` is below 1 or ``older_than`` is naive.
    """
    if not isinstance(retain_last, int) or retain_last < 1:
        raise ConfigError(f"retain_last {retain_last!r}: keep at least 1 snapshot.")
    catalog, target = _procedure_target(table)
    result = _call(
        spark,
        catalog,
        "expire_snapshots",
        [f"table => '{target}'", f"older_than => {timestamp_literal(older_than)}", f"retain_last => {retain_last}"],
    )
    return {column: int(result[column].iloc[0]) for column in result.columns}


def remove_orphan_files(spark: SparkSession, table: str, older_than: datetime, dry_run: bool = True) -> list[str]:
    """Find (and unless ``dry_run``, delete) files under the table no metadata references.

    Args:
        spark: The session.
        table: Qualified table name.
        older_than: Only files last modified before this; at most now minus :data:`MIN_ORPHAN_AGE`,
            because a running writer's uncommitted files look exactly like orphans.
        dry_run: Only list them.

    Returns:
        The orphan files' locations.

    Raises:
        ConfigError: If ``older_than`` is less than 24 hours ago.
    """
    if older_than.tzinfo is not None and older_than > datetime.now(UTC) - MIN_ORPHAN_AGE:
        raise ConfigError(
            f"older_than {older_than.isoformat()}: orphan removal must only touch files older than "
            f"{MIN_ORPHAN_AGE}; a running writer's files are not referenced until it commits."
        )
    catalog, target = _procedure_target(table)
    result = _call(
        spark,
        catalog,
        "remove_orphan_files",
        [
            f"table => '{target}'",
            f"older_than => {timestamp_literal(older_than)}",
            f"dry_run => {str(dry_run).lower()}",
        ],
    )
    return list(result["orphan_file_location"]) if "orphan_file_location" in result else []


def default_rewrite_options() -> dict[str, str]:
    """Options for binpack on a streaming table: merge any partition with two or more files.

    Iceberg's default ``min-input-files`` (5) leaves partitions of two to four files alone; a streamed
    hour has hundreds, a trickle hour a few, and both should end as one file per target size.
    """
    return {"min-input-files": "2"}
