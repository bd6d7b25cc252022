"""What an ingest run did, as tables: progress per batch, freshness per batch and per row.

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
from icestream.lake.ddl import checked_table_name
from icestream.lake.statement import DataFrameCall, Statement, snapshot_id_literal
from icestream.lake.summary import (
    BATCH_KEY,
    CREATED_KEY,
    FIRST_ARRIVAL_KEY,
    LAST_ARRIVAL_KEY,
    POSITIONS_KEY,
    STREAM_KEY,
)
from icestream.lake.table import LakeTable

if TYPE_CHECKING:
    from datetime import datetime

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


EMPTY_PROGRESS_COLUMNS = (
    "batch_id",
    "started",
    "read",
    "written",
    "rejected",
    "deduplicated",
    "replayed",
    "input_rows_per_s",
    "processed_rows_per_s",
    "behind_before_s",
    "behind_s",
    "backlog",
    "replay",
    "total_s",
)


def only_replayed(batch: dict[str, Any]) -> bool:
    """Whether a batch read records but brought nothing new: each was one a table held, or a duplicate.

    Such a batch commits no rows; it commits the positions it read past only where a table's position
    is due (:func:`icestream.ingest.commits.commit_due`). A query started before that starts where the
    table it commits least often left off (the rejects table, when the last batches brought no
    rejects; or the events table's position before a batch of duplicates only) and reads those
    records again: its lag is that of the older position, not of the stream, and its rate is not
    traffic.
    """
    return batch["num_input_rows"] > 0 and batch["written"] == 0 and batch["rejected"] == 0


def progress_frame(progress: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per batch: counts, rates, lag and the duration of each phase (seconds).

    ``behind_before_s`` is how far behind the tip the batch's read began (the largest over its
    shards), ``behind_s`` how far after it (``MillisBehindLatest``: 0 once a read reaches the tip).
    ``backlog`` is True for a batch that read records which arrived before the first batch began:
    what waited in the stream, not live traffic. ``replay`` is True for a batch that brought nothing new
    (:func:`only_replayed`): neither backlog nor live traffic.
    """
    import pandas as pd

    batches = list(progress)
    start = pd.Timestamp(batches[0]["timestamp"]).timestamp() if batches else None
    rows = []
    for batch in batches:
        before = batch.get("millis_behind_before_read")
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
            "behind_before_s": None if before is None else before / 1000,
            "behind_s": None if batch["millis_behind_latest"] is None else batch["millis_behind_latest"] / 1000,
            "backlog": batch.get("first_arrival") is not None and start is not None and batch["first_arrival"] < start,
            "replay": only_replayed(batch),
        }
        row.update({f"{phase}_s": ms / 1000 for phase, ms in batch["duration_ms"].items()})
        rows.append(row)
    # No batch (an AvailableNow run on a stream with nothing new): the same columns, no rows.
    frame = pd.DataFrame(rows) if rows else pd.DataFrame(columns=EMPTY_PROGRESS_COLUMNS)
    if not rows:
        frame = frame.astype(
            {
                "batch_id": "int64",
                "backlog": "bool",
                "replay": "bool",
                "read": "int64",
                "written": "int64",
                "rejected": "int64",
                "deduplicated": "int64",
                "replayed": "int64",
            }
        )
    for column in ("behind_before_s", "behind_s"):
        if column in frame:
            frame[column] = frame[column].astype("Float64")  # a missing lag shows as <NA>, not NaN
    return frame


def shard_lag_frame(progress: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per batch and shard: records read, and seconds behind the tip before and after the read.

    Batches that only read again records a table held (:func:`only_replayed`) are left out: their
    lag is that of an older position, not of the stream.
    """
    import pandas as pd

    rows = [
        {
            "batch_id": batch["batch_id"],
            "shard": str(int(shard.rsplit("-", 1)[-1])) if shard.rsplit("-", 1)[-1].isdigit() else shard,
            "read": stats["read"],
            "behind_before_s": None
            if stats.get("millis_behind_before_read") is None
            else stats["millis_behind_before_read"] / 1000,
            "behind_after_s": None if stats["millis_behind_latest"] is None else stats["millis_behind_latest"] / 1000,
        }
        for batch in progress
        if not only_replayed(batch)
        for shard, stats in batch["shards"].items()
    ]
    frame = pd.DataFrame(rows, columns=["batch_id", "shard", "read", "behind_before_s", "behind_after_s"])
    return frame.astype({"behind_before_s": "Float64", "behind_after_s": "Float64"})


def freshness(
    spark: SparkSession, settings: Settings, progress: Iterable[dict[str, Any]], table: LakeTable | None = None
) -> pd.DataFrame:
    """Seconds from Kinesis arrival to visible in the table, for every row the batches wrote.

    Two statements, recorded on ``table``: the commit times of the batches' snapshots, then the
    arrival times of the rows those batches wrote (found by their batch's ``ingest_ts``).

    Args:
        spark: The session.
        settings: Names the events table.
        progress: The batches to measure (e.g. ``query.recent_progress``).
        table: The events table that runs and records the statements (default: a new one).

    Returns:
        A pandas frame with ``batch_id`` and ``freshness_s`` per row.
    """
    import pandas as pd

    committed = {batch["events_snapshot_id"]: batch for batch in progress if batch.get("events_snapshot_id")}
    # Rows carry their batch's ingest_ts; progress from before it was reported has only the start.
    stamps = {snapshot: batch.get("ingest_ts") or batch["timestamp"] for snapshot, batch in committed.items()}
    if not committed:
        return pd.DataFrame({"batch_id": pd.Series([], dtype="int64"), "freshness_s": pd.Series([], dtype=float)})
    table = table or LakeTable(spark, settings.table_name)
    # A time range, not a list of every id: the statements stay short (a run has dozens of batches),
    # and the merges below keep only these batches' snapshots and rows. A batch commits after it began.
    moments = [pd.Timestamp(stamp).to_pydatetime() for stamp in stamps.values()]
    bounds = {"first": min(moments), "last": max(moments)}
    snapshots = table.run(
        Statement(
            f"SELECT snapshot_id, committed_at FROM {table.name}.snapshots WHERE committed_at >= :first",
            {"first": bounds["first"]},
        )
    ).toPandas()
    batches = pd.DataFrame(
        {
            "snapshot_id": list(committed),
            "batch_id": [batch["batch_id"] for batch in committed.values()],
            # The session time zone is UTC, so Spark hands back naive UTC timestamps.
            "ingest_ts": [pd.Timestamp(stamp).tz_convert("UTC").tz_localize(None) for stamp in stamps.values()],
        }
    ).merge(snapshots, on="snapshot_id")
    rows = table.run(
        Statement(
            f"SELECT ingest_ts, arrival_ts FROM {table.name} WHERE ingest_ts BETWEEN :first AND :last",
            bounds,
        )
    ).toPandas()
    merged = rows.merge(batches, on="ingest_ts")
    merged["freshness_s"] = (merged["committed_at"] - merged["arrival_ts"]).dt.total_seconds()
    return merged[["batch_id", "freshness_s"]]


def percentiles(values: pd.Series, points: Iterable[int] = (50, 95, 99)) -> dict[str, float]:
    """``{"p50": ..., "p95": ..., "p99": ...}`` of a series (NaN-free)."""
    return {f"p{point}": float(values.quantile(point / 100)) for point in points} if len(values) else {}


def rejects_by_reason(
    spark: SparkSession, settings: Settings, since: datetime | None = None, table: LakeTable | None = None
) -> pd.DataFrame:
    """Rejected records per reason, with one example detail each, most frequent first.

    Args:
        spark: The session.
        settings: Names the rejects table.
        since: Also count, as ``this_run``, the rejects a batch wrote at or after this moment.
        table: The rejects table that runs and records the statement (default: a new one).
    """
    table = table or LakeTable(spark, settings.rejects_table_name)
    if since is None:
        statement = Statement(
            f"SELECT reason, count(*) AS records, min(detail) AS example_detail FROM {table.name} "
            "GROUP BY reason ORDER BY records DESC, reason"
        )
    else:
        statement = Statement(
            f"""
            SELECT reason, count_if(ingest_ts >= :since) AS this_run, count(*) AS all_runs,
                   min_by(detail, ingest_ts < :since) AS example_detail
            FROM {table.name}
            GROUP BY reason
            ORDER BY this_run DESC, all_runs DESC, reason
            """,
            {"since": since},
        )
    return table.run(statement).toPandas()


def positions_statement(settings: Settings, table_name: str) -> Statement:
    """The SQL equivalent of the position read (:func:`icestream.ingest.positions.load_committed`).

    The ingest walks the current snapshot's ancestry with Iceberg's API, newest first, to the first
    snapshot that recorded positions for the stream; on a table without branches or rollbacks that
    is the newest such snapshot in the ``snapshots`` metadata table.
    """
    name = checked_table_name(table_name)
    return Statement(
        f"""
        SELECT snapshot_id, committed_at, summary['{BATCH_KEY}'] AS batch_id, summary['{POSITIONS_KEY}'] AS positions
        FROM {name}.snapshots
        WHERE summary['{STREAM_KEY}'] = :stream
        ORDER BY committed_at DESC
        LIMIT 1
        """,
        {"stream": settings.stream_name},
    )


def write_call(table: LakeTable, snapshot_id: int) -> DataFrameCall:
    """The ingest's DataFrame write that made a snapshot, rebuilt from that snapshot's summary.

    The sink (:mod:`icestream.ingest.sink`) commits a batch with
    ``frame.writeTo(table).options(**properties).append()``; each ``snapshot-property.<key>``
    option lands in the snapshot summary as ``<key>``, so the summary gives back the exact values.
    Write options that leave no trace in the summary (``distribution-mode``) are not shown. The
    summary is read by a statement, then the call is recorded on ``table`` after it: Python that
    parses, with the frame it writes defined (empty: a paste commits the properties alone) and
    each epoch value's UTC time beside it.
    """
    row = table.run(
        Statement(
            f"SELECT summary FROM {table.name}.snapshots WHERE snapshot_id = :snapshot_id",
            {"snapshot_id": snapshot_id_literal(snapshot_id)},
        )
    ).first()
    summary = row[0] if row else {}
    options = "".join(
        f'\n    .option("snapshot-property.{key}", {value!r}){_epoch_comment(key, value)}'
        for key, value in sorted(summary.items())
        if key.startswith("icestream.")
    )
    code = (
        f'batch = spark.table("{table.name}").limit(0)  # the batch\'s rows (none here)\n'
        f'(\n    batch.writeTo("{table.name}"){options}\n    .append()\n)'
    )
    call = DataFrameCall(code, writes=True)
    table.record(call)
    return call


def _epoch_comment(key: str, value: str) -> str:
    """``  # <UTC time>`` for a summary value that is an epoch (milliseconds or seconds), else nothing."""
    from icestream.timestamps import from_micros

    if key in (FIRST_ARRIVAL_KEY, LAST_ARRIVAL_KEY):
        return f"  # {from_micros(int(value) * 1000):%Y-%m-%d %H:%M:%S.%f}"[:-3] + " UTC"
    if key == CREATED_KEY:
        return f"  # {from_micros(round(float(value) * 1_000_000)):%Y-%m-%d %H:%M:%S.%f}"[:-3] + " UTC"
    return ""


def committed_positions(spark: SparkSession, settings: Settings) -> pd.DataFrame:
    """Each table's committed position per shard, and where it was found (snapshot or data)."""
    import pandas as pd

    from icestream.ingest.positions import load_committed

    rows: list[dict[str, object]] = []
    for table in (settings.table_name, settings.rejects_table_name):
        committed = load_committed(spark, table, settings.stream_name)
        rows.extend(
            {"table": table.rsplit(".", 1)[-1], "shard": shard, "position": position, "source": committed.source}
            for shard, position in sorted(committed.positions.items())
        )
    return pd.DataFrame(rows, columns=["table", "shard", "position", "source"])


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
