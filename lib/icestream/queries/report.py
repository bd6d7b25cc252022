"""What an ingest run did, as tables: progress per batch and freshness per row.

Freshness is measured from the table, not estimated: a row becomes visible to queries when the
snapshot of its batch commits, so its freshness is that snapshot's ``committed_at`` minus the
record's Kinesis ``arrival_ts``. Rows know their batch by ``ingest_ts`` (one value per batch) and
the progress of each batch names the snapshot it committed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icestream.config import Settings
from icestream.ingest.progress import PROGRESS_FILE

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession


def read_progress(settings: Settings, query_id: str | None = None, path: Path | None = None) -> list[dict[str, Any]]:
    """Progress lines written by ingest queries (all, or one query's).

    Args:
        settings: Locates ``<run_dir>/ingest_progress.jsonl``.
        query_id: Keep only this query's batches.
        path: Another progress file.

    Returns:
        One dict per batch, oldest first.
    """
    path = path or settings.path("run_dir") / PROGRESS_FILE
    if not path.is_file():
        return []
    batches = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [batch for batch in batches if query_id is None or batch["id"] == query_id]


def progress_frame(progress: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per batch: counts, rates, lag and the duration of each phase (seconds)."""
    import pandas as pd

    rows = []
    for batch in progress:
        row = {
            "batch_id": batch["batch_id"],
            "started": pd.Timestamp(batch["timestamp"]),
            "read": batch["num_input_rows"],
            "written": batch["written"],
            "rejected": batch["rejected"],
            "deduplicated": batch["deduplicated"],
            "replayed": batch["replayed"],
            "input_rows_per_s": batch["input_rows_per_second"],
            "processed_rows_per_s": batch["processed_rows_per_second"],
            "behind_s": None if batch["millis_behind_latest"] is None else batch["millis_behind_latest"] / 1000,
        }
        row.update({f"{phase}_s": ms / 1000 for phase, ms in batch["duration_ms"].items()})
        rows.append(row)
    return pd.DataFrame(rows)


def freshness(spark: SparkSession, settings: Settings, progress: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Seconds from Kinesis arrival to visible in the table, for every row the batches wrote.

    Args:
        spark: The session.
        settings: Names the events table.
        progress: The batches to measure (e.g. ``query.recent_progress``).

    Returns:
        A pandas frame with ``batch_id`` and ``freshness_s`` per row.
    """
    import pandas as pd
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    committed = {batch["events_snapshot_id"]: batch for batch in progress if batch.get("events_snapshot_id")}
    # Rows carry their batch's ingest_ts; progress from before it was reported has only the start.
    stamps = {snapshot: batch.get("ingest_ts") or batch["timestamp"] for snapshot, batch in committed.items()}
    if not committed:
        return pd.DataFrame({"batch_id": [], "freshness_s": []})
    snapshots = (
        spark.table(f"{settings.table_name}.snapshots")
        .where(F.col("snapshot_id").isin(list(committed)))
        .select("snapshot_id", "committed_at")
        .toPandas()
    )
    batches = pd.DataFrame(
        {
            "snapshot_id": list(committed),
            "batch_id": [batch["batch_id"] for batch in committed.values()],
            # The session time zone is UTC, so Spark hands back naive UTC timestamps.
            "ingest_ts": [pd.Timestamp(stamp).tz_convert("UTC").tz_localize(None) for stamp in stamps.values()],
        }
    ).merge(snapshots, on="snapshot_id")
    rows = (
        spark.table(settings.table_name)
        .where(F.col("ingest_ts").isin([pd.Timestamp(stamp).to_pydatetime() for stamp in stamps.values()]))
        .select("ingest_ts", "arrival_ts")
        .toPandas()
    )
    merged = rows.merge(batches, on="ingest_ts")
    merged["freshness_s"] = (merged["committed_at"] - merged["arrival_ts"]).dt.total_seconds()
    return merged[["batch_id", "freshness_s"]]


def percentiles(values: pd.Series, points: Iterable[int] = (50, 95, 99)) -> dict[str, float]:
    """``{"p50": ..., "p95": ..., "p99": ...}`` of a series (NaN-free)."""
    return {f"p{point}": float(values.quantile(point / 100)) for point in points} if len(values) else {}


def rejects_by_reason(spark: SparkSession, settings: Settings) -> pd.DataFrame:
    """Rejected records per reason, with one example detail each, most frequent first."""
    return spark.sql(
        "SELECT reason, count(*) AS records, min(detail) AS example_detail "
        f"FROM {settings.rejects_table_name} GROUP BY reason ORDER BY records DESC, reason"
    ).toPandas()


def committed_positions(spark: SparkSession, settings: Settings) -> pd.DataFrame:
    """Each table's committed position per shard, and where it was found (snapshot or data)."""
    import pandas as pd

    from icestream.ingest.positions import load_committed

    rows = []
    for table in (settings.table_name, settings.rejects_table_name):
        committed = load_committed(spark, table, settings.stream_name)
        rows.extend(
            {"table": table.rsplit(".", 1)[-1], "shard": shard, "position": position, "source": committed.source}
            for shard, position in sorted(committed.positions.items())
        )
    return pd.DataFrame(rows, columns=["table", "shard", "position", "source"])
