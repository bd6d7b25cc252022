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
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import pandas as pd

from icestream.lake.inspect import DATA_CONTENT
from icestream.lake.statement import Statement
from icestream.lake.table import LakeTable
from icestream.runtime.handles import first_row

if TYPE_CHECKING:
    pass

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
