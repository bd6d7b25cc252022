"""Spark Structured Streaming on the lake (notebook 10): its tables, and the truth its lessons are checked against.

The statements the notebook teaches (``readStream``, ``withWatermark``, ``writeStream``, ``foreachBatch``
with a ``MERGE``) are its cells. This module holds what they are checked against, computed in pandas
without Spark, so that a lesson cannot silently stop being true:

- :func:`streaming_names`: the notebook's tables and checkpoint folder, named from the settings;
- :func:`watermark_truth`: Spark's watermark rule for a tumbling-window count in append mode, applied
  to rows whose micro-batch is known: the watermark each batch runs with is the newest event time of
  the batches before it minus the delay; a row whose window ends at or before that watermark is
  dropped; a window is written once the watermark reaches its end, and not before;
- :func:`late_in_arrival`: which events arrived after a newer one (what a watermark is for);
- :func:`progress_table`: a query's ``recentProgress`` as a frame (the numbers the Spark UI charts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icestream.config import STREAMING_SUFFIXES
from icestream.errors import ConfigError
from icestream.producer.run import read_run_summary, run_summary_path

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd
    from pandas.api.typing import NaTType

    from icestream.config import Settings

CHECKPOINTS = "checkpoints/10_structured_streaming"  # under the run folder: one folder per query


@dataclass(frozen=True)
class StreamingNames:
    """Notebook 10's tables (companions of the events table) and the folder of its queries' checkpoints."""

    arrivals: str  # this run's backfill replayed in arrival order, one commit per poll
    windows: str  # events per window and type, written by the watermarked query
    sessions: str  # per-session totals kept by foreachBatch's MERGE
    device_channels: str  # the static side of the stream-static join
    stream_copy: str  # the events table copied by Iceberg's streaming sink (exactly-once, watched)
    checkpoints: Path


def streaming_names(settings: Settings) -> StreamingNames:
    """The tables and checkpoint folder of notebook 10 (``<table>_<suffix>``, suffixes from config)."""
    tables = [settings.companion_table_name(suffix) for suffix in STREAMING_SUFFIXES]
    arrivals, windows, sessions, device_channels, stream_copy = tables
    return StreamingNames(
        arrivals, windows, sessions, device_channels, stream_copy, settings.path("run_dir") / CHECKPOINTS
    )


def backfill_run(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The id and the generator's counts of 01's last backfill (its run summary), the run notebook 10 replays.

    Raises:
        ConfigError: If no backfill summary with a run id is in the run folder (01 has not run).
    """
    summary = read_run_summary(run_summary_path(settings, "backfill"))
    if summary is None or summary.run_id is None:
        raise ConfigError(
            f"no backfill run summary in {settings.path('run_dir')}: run 01_produce_events.ipynb and "
            "02_stream_ingest.ipynb first (notebook 10 replays 01's backfill from the events table)."
        )
    return summary.run_id, {**(summary.generator or {}).get("counts", {}), "retried": summary.producer.retried}


def late_in_arrival(arrival_ts: pd.Series, event_ts: pd.Series) -> pd.Series:
    """Which events arrived after a newer one: an event time below the newest of every earlier arrival.

    Records that Kinesis stamped with the same arrival instant (one PutRecords call, shards side by
    side) arrived together: none of them is after another.

    Args:
        arrival_ts: Kinesis arrival times, in arrival order.
        event_ts: The events' times, on the same index.

    Returns:
        A boolean Series on the same index.
    """
    import pandas as pd

    newest_per_instant = event_ts.groupby(arrival_ts.to_numpy(), sort=True).max()
    newest_before = newest_per_instant.cummax().shift(1)
    before = pd.Series(newest_before.reindex(arrival_ts.to_numpy()).to_numpy(), index=event_ts.index)
    return (event_ts < before).fillna(False).astype(bool)


@dataclass(frozen=True)
class WatermarkTruth:
    """What Spark's watermark rule makes of rows read in known micro-batches.

    Attributes:
        watermarks: Per micro-batch (index): the watermark it ran with; NaT before any event was seen.
        final_watermark: The watermark after the last batch (what the query's next batch would run with).
        dropped: The rows the watermark drops (``batch``, their columns, ``window_end``, ``watermark``).
        windows: The windows append mode has written: ``window_start``, ``window_end``, ``event_type``,
            ``events``; those whose end the final watermark reached.
        pending: Windows still open at the final watermark (held in the state store, not yet written).
    """

    watermarks: pd.Series
    final_watermark: pd.Timestamp | NaTType
    dropped: pd.DataFrame
    windows: pd.DataFrame
    pending: pd.DataFrame


def watermark_truth(
    rows: pd.DataFrame, *, delay: pd.Timedelta, window: pd.Timedelta, batch_column: str = "batch"
) -> WatermarkTruth:
    """Apply the watermark rule of a windowed count in append mode to rows whose micro-batch is known.

    Args:
        rows: ``event_ts`` (UTC, naive or aware), ``event_type`` and ``batch_column`` (0, 1, ...: the
            micro-batch that read the row).
        delay: The watermark's delay (``withWatermark("event_ts", delay)``).
        window: The tumbling window's length (``window("event_ts", window)``, aligned to the epoch).
        batch_column: The column naming each row's micro-batch.

    Returns:
        The watermarks, the dropped rows, the written windows and the pending ones.
    """
    import pandas as pd

    frame = rows.copy()
    frame["event_ts"] = pd.to_datetime(frame["event_ts"], utc=True)
    batches = sorted(frame[batch_column].unique())
    newest = frame.groupby(batch_column)["event_ts"].max().reindex(batches)
    # A batch runs with the watermark the batches before it set; it never moves back.
    watermarks = (newest.cummax() - delay).shift(1)
    final_watermark = newest.max() - delay if len(newest) else pd.NaT
    frame["window_start"] = frame["event_ts"].dt.floor(window)
    frame["window_end"] = frame["window_start"] + window
    frame["watermark"] = frame[batch_column].map(watermarks)
    is_dropped = frame["window_end"] <= frame["watermark"]
    kept = frame[~is_dropped]
    counts = kept.groupby(["window_start", "window_end", "event_type"]).size().rename("events").reset_index()
    closed = counts["window_end"] <= final_watermark
    return WatermarkTruth(
        watermarks=watermarks,
        final_watermark=final_watermark,
        dropped=frame[is_dropped].drop(columns=["window_start"]).reset_index(drop=True),
        windows=counts[closed].reset_index(drop=True),
        pending=counts[~closed].reset_index(drop=True),
    )


def windows_compared(written: pd.DataFrame, truth: WatermarkTruth) -> pd.DataFrame:
    """The windows the query wrote beside the rule's, one row per window and type (0 where one side has none).

    Args:
        written: The windows table read back: ``window_start``, ``event_type``, ``events`` (naive UTC or aware).
        truth: :func:`watermark_truth`'s result.

    Returns:
        ``window_start``, ``event_type``, ``written`` and ``rule`` (counts as integers).
    """
    import pandas as pd

    def keyed(frame: pd.DataFrame) -> pd.Series:
        starts = pd.to_datetime(frame["window_start"], utc=True)
        return frame.assign(window_start=starts).set_index(["window_start", "event_type"])["events"]

    both = pd.concat({"written": keyed(written), "rule": keyed(truth.windows)}, axis=1)
    return both.fillna(0).astype("int64").sort_index().reset_index()


def _instant(value: str | None) -> pd.Timestamp | NaTType:
    import pandas as pd

    # Spark reports "1970-01-01T00:00:00.000Z" as the watermark before any event was seen.
    if not value or value.startswith("1970-01-01T00:00:00"):
        return pd.NaT
    return pd.Timestamp(value)


def progress_table(progress: Iterable[Mapping[str, Any]], query: str | None = None) -> pd.DataFrame:
    """A query's ``recentProgress`` (or several runs' progress, in order) as a frame, one row per micro-batch.

    Args:
        progress: ``StreamingQueryProgress`` entries as dicts (``query.recentProgress``).
        query: A name for the ``query`` column (several queries in one frame).

    Returns:
        ``batch_id``, ``timestamp``, ``input_rows``, ``rows_per_s``, ``duration_s``, ``min_event_ts``, ``max_event_ts``,
        ``watermark``, ``state_rows`` and ``dropped_by_watermark`` (Spark's state-store metric: it counts
        partial aggregates, one per window and key per task, not events), and ``query`` when given.
    """
    import pandas as pd

    rows = []
    for entry in progress:
        event_time = entry.get("eventTime") or {}
        state = (entry.get("stateOperators") or [{}])[0]
        rows.append(
            {
                "batch_id": int(entry["batchId"]),
                "timestamp": pd.Timestamp(entry["timestamp"]),
                "input_rows": int(entry.get("numInputRows") or 0),
                "rows_per_s": round(float(entry.get("processedRowsPerSecond") or 0.0), 1),
                "duration_s": round((entry.get("durationMs") or {}).get("triggerExecution", 0) / 1000, 3),
                "min_event_ts": _instant(event_time.get("min")),
                "max_event_ts": _instant(event_time.get("max")),
                "watermark": _instant(event_time.get("watermark")),
                "state_rows": state.get("numRowsTotal"),
                "dropped_by_watermark": state.get("numRowsDroppedByWatermark"),
            }
        )
    columns = [
        "batch_id",
        "timestamp",
        "input_rows",
        "rows_per_s",
        "duration_s",
        "min_event_ts",
        "max_event_ts",
        "watermark",
        "state_rows",
        "dropped_by_watermark",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    for column in ("state_rows", "dropped_by_watermark"):
        frame[column] = frame[column].astype("Int64")
    for column in ("min_event_ts", "max_event_ts", "watermark"):  # NaT beside instants: a datetime column, not objects
        frame[column] = pd.to_datetime(frame[column], utc=True)
    if query is not None:
        frame.insert(0, "query", query)
    return frame


def checkpoint_files(checkpoint: Path) -> pd.DataFrame:
    """What a checkpoint folder holds: ``offsets/N`` (what batch N read) and ``commits/N`` (batch N done).

    Returns:
        One row per batch id: ``batch_id``, ``offsets`` and ``commits`` (True where the file exists).
    """
    import pandas as pd

    found: dict[int, dict[str, bool]] = {}
    for log in ("offsets", "commits"):
        folder = checkpoint / log
        for path in folder.iterdir() if folder.is_dir() else ():
            if path.name.isdigit():
                found.setdefault(int(path.name), {"offsets": False, "commits": False})[log] = True
    rows = [{"batch_id": batch, **logs} for batch, logs in sorted(found.items())]
    return pd.DataFrame(rows, columns=["batch_id", "offsets", "commits"])
