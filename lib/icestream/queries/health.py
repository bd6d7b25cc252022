"""Table health: the numbers that matter, read from Iceberg's metadata tables, and an OK/WARN report.

The metadata comes from :class:`icestream.lake.LakeTable` (``table.inspect``); maintenance is
``table.maintenance``. This module only judges.

What "healthy" means is relative to what compaction can achieve. A streaming ingest commits a file
per partition every few seconds, so an hour partition ends up with hundreds of files of a few
kilobytes. Iceberg's ``binpack`` merges files below 75 % of the target size
(``write.target-file-size-bytes``) when a partition holds several, so a *small file* here is one below
that size that shares its partition with another data file: something compaction could merge. The
average file size is compared with what the data allows, ``min(target, partition size)`` per
partition, because a local demo's whole hour is far below 128 MiB and would otherwise always warn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from icestream.errors import ConfigError
from icestream.lake.inspect import DATA_CONTENT
from icestream.lake.statement import Statement
from icestream.lake.summary import BATCH_KEY, FIRST_ARRIVAL_KEY, LAST_ARRIVAL_KEY
from icestream.lake.table import LakeTable
from icestream.runtime.handles import first_row
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icestream.config import Settings

TARGET_FILE_SIZE_PROPERTY = "write.target-file-size-bytes"
ICEBERG_DEFAULT_TARGET = 512 * 1024 * 1024  # Iceberg's default when the table does not set one
SMALL_FILE_FRACTION = 0.75  # binpack's default min-file-size-bytes is 75 % of the target


def target_file_bytes(table: LakeTable) -> int:
    """The table's target data file size (``write.target-file-size-bytes``, else Iceberg's default)."""
    return int(table.inspect.properties().get(TARGET_FILE_SIZE_PROPERTY) or ICEBERG_DEFAULT_TARGET)


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
    metadata_unavailable: str = ""  # why some metadata sizes are unknown (a listing failed); empty when all are known
    # Rows the delete files mark as deleted (position deletes: one per row), which every read
    # still scans and then drops: merge-on-read's read amplification until compaction applies them.
    deleted_rows: int = 0

    def table(self) -> dict[str, float | int]:
        """The numbers as one row for a pandas table (sizes in MiB; ``metadata_unavailable`` is in the report)."""
        values: dict[str, float | int] = asdict(self)
        values.pop("metadata_unavailable")
        for key in (
            "data_bytes",
            "average_file_bytes",
            "achievable_average_bytes",
            "target_file_bytes",
            "metadata_bytes",
        ):
            values[key.replace("bytes", "MiB")] = round(values.pop(key) / 2**20, 3)
        return values


def collect_stats(table: LakeTable, small_file_bytes: int | None = None) -> TableStats:
    """Collect the table's health numbers from its metadata tables.

    Args:
        table: The table.
        small_file_bytes: Files below this are small (default 75 % of the table's target file size).

    Returns:
        The numbers.
    """
    target = target_file_bytes(table)
    small_file_bytes = small_file_bytes or int(target * SMALL_FILE_FRACTION)
    files = table.inspect.files()
    data = files[files["content"] == DATA_CONTENT]
    per_partition = data.groupby("partition").agg(files=("file_path", "size"), bytes=("file_size_in_bytes", "sum"))
    shared = data["partition"].map(per_partition["files"]) > 1
    achievable_files = int(sum(max(1, math.ceil(b / target)) for b in per_partition["bytes"]))
    data_bytes = int(data["file_size_in_bytes"].sum())
    meta = table.inspect.metadata_files()
    unavailable = meta["unavailable"].dropna()
    return TableStats(
        records=int(data["record_count"].sum()),
        data_files=len(data),
        delete_files=int((files["content"] != DATA_CONTENT).sum()),
        data_bytes=data_bytes,
        partitions=len(per_partition),
        max_files_per_partition=int(per_partition["files"].max()) if len(per_partition) else 0,
        small_files=int(((data["file_size_in_bytes"] < small_file_bytes) & shared).sum()),
        average_file_bytes=data_bytes / len(data) if len(data) else 0.0,
        achievable_average_bytes=data_bytes / achievable_files if achievable_files else 0.0,
        target_file_bytes=target,
        snapshots=len(table.inspect.snapshots()),
        manifests=len(table.inspect.manifests()),
        metadata_bytes=int(meta.loc[meta["kind"] != "previous metadata.json", "bytes"].fillna(0).sum()),
        previous_metadata_bytes=int(meta.loc[meta["kind"] == "previous metadata.json", "bytes"].fillna(0).sum()),
        metadata_unavailable=str(unavailable.iloc[0]) if len(unavailable) else "",
        deleted_rows=int(files.loc[files["content"] != DATA_CONTENT, "record_count"].sum()),
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
        Columns ``check``, ``value``, ``limit``, ``status`` (OK, WARN, or UNKNOWN when a number could
        not be measured: the detail then starts with ``unavailable:`` and the reason), ``detail``.
    """
    files = max(stats.data_files, 1)
    size_ratio = stats.average_file_bytes / stats.achievable_average_bytes if stats.achievable_average_bytes else 1.0
    metadata_ratio = stats.metadata_bytes / stats.data_bytes if stats.data_bytes else 0.0
    lines = [
        (
            "small-file ratio",
            stats.small_files / files,
            thresholds.max_small_file_ratio,
            "max",
            f"{stats.small_files} of {stats.data_files} data files are small and share a partition",
        ),
        (
            "average file size / achievable",
            size_ratio,
            thresholds.min_average_size_ratio,
            "min",
            f"average {stats.average_file_bytes / 2**20:.3f} MiB; "
            f"achievable {stats.achievable_average_bytes / 2**20:.3f} MiB "
            f"(target {stats.target_file_bytes / 2**20:.0f} MiB)",
        ),
        (
            "files in the fullest partition",
            stats.max_files_per_partition,
            thresholds.max_files_per_partition,
            "max",
            f"{stats.data_files} data files over {stats.partitions} partitions",
        ),
        ("snapshots", stats.snapshots, thresholds.max_snapshots, "max", "each one is kept metadata"),
        (
            "metadata bytes / data bytes",
            metadata_ratio,
            thresholds.max_metadata_ratio,
            "max",
            f"{stats.metadata_bytes / 2**20:.2f} MiB of metadata for {stats.data_bytes / 2**20:.2f} MiB of data, "
            f"{stats.manifests} manifests; {stats.previous_metadata_bytes / 2**20:.2f} MiB of older metadata.json",
        ),
        (
            "delete files / data files",
            stats.delete_files / files,
            thresholds.max_delete_file_ratio,
            "max",
            f"{stats.delete_files} delete files, {stats.deleted_rows} rows deleted",
        ),
    ]
    unknown = {"metadata bytes / data bytes": stats.metadata_unavailable} if stats.metadata_unavailable else {}
    rows = []
    for check, value, limit, kind, detail in lines:
        ok = value <= limit if kind == "max" else value >= limit
        rows.append(
            {
                "check": check,
                # A count stays an integer (a file count of 1, not 1.000); ratios keep three places.
                "value": value if isinstance(value, int) else round(float(value), 3),
                "limit": f"{'≤' if kind == 'max' else '≥'} {limit:g}",
                "status": "UNKNOWN" if check in unknown else "OK" if ok else "WARN",
                # A size that could not be measured is said so first, never counted as zero bytes.
                "detail": f"unavailable: {unknown[check]}; known part: {detail}" if check in unknown else detail,
            }
        )
    report = pd.DataFrame(rows)
    report["value"] = pd.Series([row["value"] for row in rows], dtype=object)
    return report


def content_fingerprint(table: LakeTable) -> dict[str, int]:
    """Row count and an order-independent hash of the event ids: equal before and after maintenance.

    Returns:
        ``{"rows": n, "event_id_hash": sum of xxhash64(event_id)}``.
    """
    row = first_row(
        table.run(
            Statement(
                "SELECT count(*) AS rows, "
                f"coalesce(sum(CAST(xxhash64(event_id) AS DECIMAL(38, 0))), 0) AS event_id_hash FROM {table.name}"
            )
        )
    )
    return {"rows": int(row.rows), "event_id_hash": int(row.event_id_hash)}


def plant_orphan(table: LakeTable, age: timedelta, name: str = "orphan-planted-by-07.parquet") -> str:
    """Copy one of the table's data files into its data folder, unreferenced and ``age`` old: an orphan.

    This is what a writer that crashed between writing a file and committing it leaves behind, and
    what ``remove_orphan_files`` exists for. The copy's modification time is set ``age`` back, so
    the procedure's ``older_than`` (which Iceberg refuses under 24 hours, to spare a running
    writer's uncommitted files) reaches it without waiting a day.

    Args:
        table: The table (its warehouse must be a local folder: only there can a file's time be set).
        age: How old the file is made to look.
        name: The file's name in ``<table location>/data``.

    Returns:
        The file's local path.

    Raises:
        ConfigError: If the table is not in a local folder, has no data file, or ``name`` is not a plain file name.
    """
    import os
    import shutil
    from datetime import UTC
    from pathlib import Path
    from urllib.parse import urlparse

    from icestream.lake.inspect import load_iceberg_table

    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"orphan file name {name!r}: give a plain file name such as orphan.parquet.")
    location = urlparse(str(load_iceberg_table(table.spark, table.name).location()))
    if location.scheme not in ("", "file"):
        raise ConfigError(f"{table.name} is in {location.scheme}://: planting an orphan needs a local warehouse.")
    files = table.inspect.data_files()
    if files.empty:
        raise ConfigError(f"{table.name} has no data file to copy: ingest some events first (notebook 02).")
    orphan = Path(location.path) / "data" / name
    shutil.copyfile(urlparse(files["file_path"].iloc[-1]).path, orphan)
    moment = (datetime.now(UTC) - age).timestamp()
    os.utime(orphan, (moment, moment))
    return str(orphan)


def batch_freshness(table: LakeTable) -> pd.DataFrame:
    """Each snapshot's freshness (docs/glossary.md): commit minus arrival of its batch's oldest and newest record.

    The ingest writes the Kinesis arrival of each batch's oldest and newest record into the
    snapshot's summary (``icestream.first-arrival-ms``, ``icestream.last-arrival-ms``); the snapshot's
    ``committed_at`` is when its rows became visible. The statement is recorded in ``table.statements``.

    Args:
        table: The events (or rejects) table.

    Returns:
        One row per snapshot, oldest first: ``snapshot_id``, ``committed_at`` (UTC), ``batch_id``,
        ``added_records`` (nullable integers), ``freshness_oldest_s`` (commit minus the oldest record's
        arrival) and ``freshness_newest_s`` (minus the newest's), in seconds; null where the summary lacks
        the keys (a maintenance commit, a position-only commit, snapshots older than the keys).
    """
    import pandas as pd

    frame = table.run(
        Statement(
            f"""
            SELECT snapshot_id, committed_at,
                   CAST(summary['{BATCH_KEY}'] AS BIGINT) AS batch_id,
                   CAST(summary['added-records'] AS BIGINT) AS added_records,
                   (unix_millis(committed_at) - CAST(summary['{FIRST_ARRIVAL_KEY}'] AS BIGINT)) / 1000D
                       AS freshness_oldest_s,
                   (unix_millis(committed_at) - CAST(summary['{LAST_ARRIVAL_KEY}'] AS BIGINT)) / 1000D
                       AS freshness_newest_s
            FROM {table.name}.snapshots
            ORDER BY committed_at, snapshot_id
            """
        )
    ).toPandas()
    for column in ("batch_id", "added_records"):  # counts stay integers next to their nulls
        frame[column] = pd.array([None if pd.isna(value) else int(value) for value in frame[column]], dtype="Int64")
    for column in (
        "freshness_oldest_s",
        "freshness_newest_s",
    ):  # a commit without a batch has no freshness: null, not NaN
        frame[column] = pd.array([None if pd.isna(value) else float(value) for value in frame[column]], dtype="Float64")
    return frame


# -- what a sort-order rewrite buys: min/max bounds that let a filter skip files ------------------
def copy_hour_for_sorting(
    spark: SparkSession,
    settings: Settings,
    source: LakeTable,
    hour_start: datetime,
    target_file_bytes: int,
    echo: bool | None = None,
) -> LakeTable:
    """Copy one hour of the events table into ``<table>_sort_demo``, written in files of a given size.

    A demo hour is far below the 128 MiB target, so it fits one file and no sort could narrow a
    file's bounds; a busy hour on a real table spans many files. The copy's
    ``write.target-file-size-bytes`` cuts the hour into several files, as size would. Every statement
    (the ``DROP``, ``CREATE``, ``ALTER`` and ``INSERT``) is recorded on the copy's ``statements``.

    Args:
        spark: The session.
        settings: Names the copy (``companion_table_name`` with :data:`~icestream.config.SORT_DEMO_SUFFIX`).
        source: The events table.
        hour_start: The hour to copy (aware).
        target_file_bytes: The copy's target file size.
        echo: Whether the copy prints its statements (None: as ``show_statements`` says); notebook 09
            keeps the set-up of the copy quiet, its lesson is the sort rewrite.

    Returns:
        The copy.

    Raises:
        ConfigError: If ``target_file_bytes`` is not a positive integer or ``hour_start`` is naive.
    """
    from icestream.config import SORT_DEMO_SUFFIX
    from icestream.lake.ddl import create_events_table

    if isinstance(target_file_bytes, bool) or not isinstance(target_file_bytes, int) or target_file_bytes < 1:
        raise ConfigError(f"target_file_bytes {target_file_bytes!r}: give a positive number of bytes.")
    if hour_start.tzinfo is None:
        raise ConfigError(f"{hour_start}: use a timezone-aware datetime (UTC).")
    companion = settings.companion(SORT_DEMO_SUFFIX)
    copy = LakeTable(spark, companion.table_name, echo=echo)
    copy.apply(Statement(f"DROP TABLE IF EXISTS {copy.name} PURGE", writes=True))
    create_events_table(
        spark, companion, lambda _name, statement: (copy.apply if statement.writes else copy.run)(statement)
    )
    copy.apply(
        Statement(
            f"ALTER TABLE {copy.name} SET TBLPROPERTIES ('{TARGET_FILE_SIZE_PROPERTY}' = '{target_file_bytes}')",
            writes=True,
        )
    )
    columns = ", ".join(validate_identifier(column, "column") for column in spark.table(copy.name).columns)
    copy.apply(
        Statement(
            f"""
            INSERT INTO {copy.name}
            SELECT {columns} FROM {source.name}
            WHERE event_ts >= :start AND event_ts < :end
            """,
            {"start": hour_start, "end": hour_start + timedelta(hours=1)},
            writes=True,
        )
    )
    return copy


def file_bounds(table: LakeTable, column: str) -> pd.DataFrame:
    """Each data file's lower and upper bound of ``column``: what a filter on it compares to skip the file.

    Read from the ``files`` metadata table's ``readable_metrics`` (``lower_bounds`` and
    ``upper_bounds`` decoded); the statement is recorded on the table.

    Returns:
        ``file_path``, ``record_count``, ``file_size_in_bytes``, ``lower_bound``, ``upper_bound``.

    Raises:
        ConfigError: If ``column`` is not a plain identifier.
    """
    column = validate_identifier(column, "column")
    return table.run(
        Statement(
            f"""
            SELECT file_path, record_count, file_size_in_bytes,
                   readable_metrics.{column}.lower_bound AS lower_bound,
                   readable_metrics.{column}.upper_bound AS upper_bound
            FROM {table.name}.files
            WHERE content = {DATA_CONTENT}
            ORDER BY lower_bound, upper_bound
            """
        )
    ).toPandas()


def files_overlapping(bounds: pd.DataFrame, low: Any, high: Any) -> pd.Series:
    """Which files a filter ``low <= column <= high`` must read: those whose bounds overlap it.

    A file without bounds (a null lower or upper bound) is always read.

    Args:
        bounds: From :func:`file_bounds`.
        low: The filter's lowest value.
        high: Its highest (``low`` for an equality filter).

    Returns:
        A boolean Series aligned with ``bounds``.
    """
    unknown = bounds["lower_bound"].isna() | bounds["upper_bound"].isna()
    return unknown | ((bounds["lower_bound"] <= high) & (bounds["upper_bound"] >= low))


def files_read(bounds: pd.DataFrame, low: Any, high: Any) -> dict[str, int]:
    """The files and records a filter ``low <= column <= high`` reads after skipping by bounds.

    Returns:
        ``files read``, ``of files``, ``records read``, ``of records`` (integers).
    """
    read = files_overlapping(bounds, low, high)
    return {
        "files read": int(read.sum()),
        "of files": len(bounds),
        "records read": int(bounds.loc[read, "record_count"].sum()),
        "of records": int(bounds["record_count"].sum()),
    }


def files_read_per_value(bounds: pd.DataFrame, values: Sequence[Any]) -> pd.DataFrame:
    """For each value, what a filter ``column = value`` reads after skipping by bounds (:func:`files_read`).

    Returns:
        Index ``value``; columns ``files read``, ``of files``, ``records read``, ``of records`` (integers).
    """
    rows = [{"value": value} | files_read(bounds, value, value) for value in values]
    return pd.DataFrame(rows, columns=["value", "files read", "of files", "records read", "of records"]).set_index(
        "value"
    )


def distinct_values(table: LakeTable, column: str) -> list[Any]:
    """The distinct values of ``column``, sorted (the statement is recorded on the table).

    Raises:
        ConfigError: If ``column`` is not a plain identifier.
    """
    column = validate_identifier(column, "column")
    rows = table.run(Statement(f"SELECT DISTINCT {column} AS value FROM {table.name} ORDER BY value")).collect()
    return [row.value for row in rows]
