"""The raw archive's retention: the role of the 30-day lifecycle rule on Firehose's S3 backup.

With ``archive_raw`` on (or ``icestream ingest --archive``), the ingest keeps every Kinesis record
as received in ``<table>_raw`` (bytes, shard, sequence number, partition key, arrival), committed
before the batch's rejects and events and with the same positions (see
:mod:`icestream.ingest.sink`). The table is partitioned by ``days(arrival_ts)``;
:func:`expire_archive` drops the days older than ``archive_retention_days`` (whole partitions, a
metadata-only delete) and expires the snapshots that still reference them, keeping the newest
snapshot that carries the ingest's positions. ``icestream maintain`` calls it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.lake.statement import Outcome, timestamp_literal
from icestream.lake.table import LakeTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class ArchiveExpiry:
    """What :func:`expire_archive` did."""

    table: str
    cutoff: datetime  # rows that arrived before this (a UTC midnight) were deleted
    deleted_rows: int
    expired: Outcome | None  # the snapshot expiry; None when the table does not exist or on a dry run
    dry_run: bool = False  # deleted_rows were only counted

    def line(self) -> str:
        """One report line, as ``icestream maintain`` prints its steps'."""
        if self.expired is None and not self.dry_run:
            return f"{'archive':<10} no raw archive table {self.table} (ingest --archive creates it)"
        day = f"{self.cutoff:%Y-%m-%d}"
        if self.dry_run:
            return f"{'archive':<10} planned (dry run): {self.deleted_rows} rows arrived before {day} would be deleted"
        files = self.expired.counts.get("deleted_data_files_count", 0) if self.expired is not None else 0
        return f"{'archive':<10} rows deleted {self.deleted_rows} (arrived before {day}), data files deleted {files}"


def check_retention_days(retention_days: int, name: str = "archive retention") -> int:
    """Return ``retention_days`` if it keeps at least one day.

    Args:
        retention_days: Days of arrival the raw archive keeps.
        name: What the caller calls it (``--archive-retention-days`` on the command line), named in the error.

    Raises:
        ConfigError: If it is not a whole number of at least 1.
    """
    if isinstance(retention_days, bool) or not isinstance(retention_days, int) or retention_days < 1:
        raise ConfigError(f"{name} {retention_days!r}: keep at least 1 day (archive_retention_days); give 1 or more.")
    return retention_days


def archive_cutoff(now: datetime, retention_days: int) -> datetime:
    """The start (UTC midnight) of the oldest day kept: whole days go, so whole partitions do.

    Raises:
        ConfigError: If ``retention_days`` is below 1 or ``now`` is naive.
    """
    check_retention_days(retention_days)
    if now.tzinfo is None:
        raise ConfigError(f"{now!r}: give a timezone-aware datetime, e.g. datetime.now(UTC).")
    oldest_kept = (now.astimezone(UTC) - timedelta(days=retention_days)).date()
    return datetime(oldest_kept.year, oldest_kept.month, oldest_kept.day, tzinfo=UTC)


def expire_archive(
    spark: SparkSession,
    settings: Settings,
    retention_days: int | None = None,
    now: datetime | None = None,
    dry_run: bool = False,
) -> ArchiveExpiry:
    """Delete the raw archive's days past retention, then expire the snapshots that held them.

    Safe while the ingest runs (Iceberg retries the conflicting commit; the delete touches only
    old days, the ingest appends to the current one).

    Args:
        spark: The session.
        settings: Name the table and the stream; ``archive_retention_days`` is the default retention.
        retention_days: Days of arrival to keep (default: the setting).
        now: The time the retention counts back from (default: now; tests pass one).
        dry_run: Only count the rows past retention; delete and expire nothing.

    Returns:
        What was deleted and expired; nothing happens if the archive was never created.

    Raises:
        ConfigError: For a retention below 1 day.
    """
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    now = now or datetime.now(UTC)
    cutoff = archive_cutoff(now, settings.archive_retention_days if retention_days is None else retention_days)
    table = LakeTable(spark, settings.archive_table_name)
    if not spark.catalog.tableExists(table.name):
        return ArchiveExpiry(table.name, cutoff, 0, None)
    old = spark.table(table.name).where(F.col("arrival_ts") < F.lit(cutoff)).count()
    if dry_run:
        return ArchiveExpiry(table.name, cutoff, old, None, dry_run=True)
    if old:
        # The cutoff is a literal built here from a validated number of days, not user text.
        spark.sql(f"DELETE FROM {table.name} WHERE arrival_ts < {timestamp_literal(cutoff)}")
    # Every snapshot up to now (wall-clock, whatever ``now`` says) may still reference the deleted days.
    expired = table.maintenance.expire_snapshots(older_than=datetime.now(UTC), keep_positions_of=settings.stream_name)
    return ArchiveExpiry(table.name, cutoff, old, expired)
