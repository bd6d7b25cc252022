"""A live look at an ingest, from its tables alone: arrivals per 10 seconds, batches, lag and rejects.

Each look reads the tables, never an ingest's memory, so it works the same beside an ingest in this
process and beside one in a terminal (``icestream ingest``). A look first refreshes both tables
(``REFRESH TABLE``): Iceberg's catalog cache keeps a table it has been asked for, and one asked for
every two seconds would never be loaded again, so another process's commits would stay unseen.

**The window** is what was committed since ``since``: rows by ``ingest_ts`` (when the ingest began
reading the batch that wrote them), batches and rejects by their snapshot's ``committed_at``. Start
it where the run started and a re-run never mixes with the runs before it.

**Cost.** A look is two Spark statements besides the refreshes. The batches and the rejects come
from the snapshot summaries of both tables (metadata only, one statement): the ingest commits the
rejects table every batch, its ``added-records`` being the batch's rejects. The arrivals per interval
read rows, but only this window's: ``ingest_ts`` holds one value per batch, so Iceberg's per-file
minimum and maximum skip every older data file exactly.

**Intervals are of Kinesis arrival** (``arrival_ts``, :data:`INTERVAL_SECONDS` each), not event time:
arrival is the clock the pipeline runs on, the one lag and freshness are measured against, so the
bars fill in as the stream is read and the gap between the last bar and now is the lag. Event time is
the producer's claim: a backfilled or late event can be hours old and would land far left of a window
the run never saw live. Rows that arrived before the window began (a backlog the run read) are
counted apart (``before_window``): in a bar beside the live traffic, one backlog of a minute's
arrivals would flatten it.

**Lag and freshness**, as docs/glossary.md defines them. The lag is the one number a look takes from
the stream, not the tables: per shard, one GetRecords of one record after the events table's committed
position, whose ``MillisBehindLatest`` is the shard's newest arrival minus the oldest record not yet
committed; the largest over the shards, and 0 once everything is committed (a drained stream shows 0
however long it stays idle). Freshness is per row, commit time minus Kinesis arrival; per batch, the
snapshot summary's first and last arrival (:data:`~icestream.lake.summary.FIRST_ARRIVAL_KEY`,
:data:`~icestream.lake.summary.LAST_ARRIVAL_KEY`) against its ``committed_at`` give the freshness of the
batch's oldest and newest record (its largest and smallest); a snapshot without those keys (written
before the ingest recorded them) shows none rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from icestream.ingest.positions import TRIM_HORIZON, is_finished, iterator_arguments, load_committed
from icestream.kinesis.clients import kinesis_client, list_shards
from icestream.lake.statement import Statement
from icestream.lake.summary import BATCH_KEY, FIRST_ARRIVAL_KEY, LAST_ARRIVAL_KEY
from icestream.lake.table import LakeTable
from icestream.timestamps import as_utc, from_micros, to_micros

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import pandas as pd
    from pyspark.sql import SparkSession

    from icestream.config import Settings

LOOKBACK = timedelta(minutes=10)  # the window of a dashboard given no start: the last ten minutes
# Arrivals are counted per 10 s: a notebook's live part of 20 s to a few minutes draws a few to a few
# dozen bars (per minute it drew two), and a 10-minute window 60.
INTERVAL_SECONDS = 10
NO_TYPE = "(none)"  # how a null event_type shows (as in the KPI dashboard)


@dataclass(frozen=True)
class LiveFrame:
    """One look at the tables: what was committed in ``(since, now]``.

    Attributes:
        since: Start of the window (aware UTC).
        now: When the look was taken (aware UTC).
        arrivals: ``interval`` (the start of a :data:`INTERVAL_SECONDS` interval of Kinesis arrival, UTC),
            ``before_window`` (the rows arrived before ``since``: a backlog the window's batches read),
            ``event_type``, ``events``; by interval, then type.
        batches: One row per ingest batch committed to the events table: ``batch_id``,
            ``snapshot_id``, ``committed_at`` (UTC), ``added_records``, ``rejected`` (the batch's
            rejects), ``first_arrival``, ``last_arrival`` (UTC, missing when the snapshot lacks
            them), ``oldest_wait_s`` and ``newest_wait_s`` (the freshness of the batch's oldest and
            newest record: commit minus its arrival); oldest first.
        rejected: Records the ingest committed to the rejects table in the window.
        newest_arrival: The newest Kinesis arrival among the rows committed (None when there are none).
        statements: The statements the look ran, in order (the same every look of one window).
        lag_s: The stream's lag behind its newest record at ``now`` (:func:`stream_lag_s`); None unmeasured.
    """

    since: datetime
    now: datetime
    arrivals: pd.DataFrame
    batches: pd.DataFrame
    rejected: int
    newest_arrival: datetime | None
    statements: tuple[Statement, ...]
    lag_s: float | None = None

    @property
    def events(self) -> int:
        """Events committed in the window."""
        return int(self.arrivals["events"].sum())

    @property
    def backlog_events(self) -> int:
        """Events committed in the window that had arrived before it began (a backlog it read)."""
        return int(self.arrivals.loc[self.arrivals["before_window"], "events"].sum())

    @property
    def freshness_s(self) -> tuple[float, float] | None:
        """The latest batch's freshness, its newest and its oldest record's (None if unknown)."""
        timed = self.batches.dropna(subset=["newest_wait_s", "oldest_wait_s"])
        return None if timed.empty else (float(timed["newest_wait_s"].iloc[-1]), float(timed["oldest_wait_s"].iloc[-1]))

    def summary(self) -> pd.DataFrame:
        """The frame's numbers as one row: ``since``, ``now``, ``events``, ``batches``, ``rejected``,
        ``lag_s``, ``freshness_min_s`` and ``freshness_max_s`` (the latest batch's)."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "since": self.since,
                    "now": self.now,
                    "events": self.events,
                    "batches": len(self.batches),
                    "rejected": self.rejected,
                    "lag_s": self.lag_s,
                    "freshness_min_s": None if self.freshness_s is None else self.freshness_s[0],
                    "freshness_max_s": None if self.freshness_s is None else self.freshness_s[1],
                }
            ]
        )


def live_statements(events: LakeTable, rejects: LakeTable, since: datetime) -> dict[str, Statement]:
    """The statements of one look (see the module docstring), by what they answer.

    Args:
        events: The events table.
        rejects: The rejects table.
        since: Start of the window.

    Returns:
        ``refresh_events``, ``refresh_rejects``, ``batches``, ``arrivals``, in the order they run.
    """
    bound = {"since": to_micros(since)}
    interval_us = INTERVAL_SECONDS * 1_000_000
    columns = (
        f"CAST(summary['{BATCH_KEY}'] AS BIGINT) AS batch_id, snapshot_id, unix_micros(committed_at) AS committed_us,\n"
        "                   CAST(summary['added-records'] AS BIGINT) AS added_records,\n"
        f"                   CAST(summary['{FIRST_ARRIVAL_KEY}'] AS BIGINT) AS first_arrival_ms,\n"
        f"                   CAST(summary['{LAST_ARRIVAL_KEY}'] AS BIGINT) AS last_arrival_ms"
    )
    in_window = f"committed_at >= timestamp_micros(:since) AND summary['{BATCH_KEY}'] IS NOT NULL"
    return {
        "refresh_events": Statement(f"REFRESH TABLE {events.name}"),
        "refresh_rejects": Statement(f"REFRESH TABLE {rejects.name}"),
        "batches": Statement(
            f"""
            SELECT 'events' AS written_to, {columns}
            FROM {events.name}.snapshots
            WHERE {in_window}
            UNION ALL
            SELECT 'rejects' AS written_to, {columns}
            FROM {rejects.name}.snapshots
            WHERE {in_window}
            """,
            bound,
        ),
        "arrivals": Statement(
            f"""
            SELECT unix_micros(arrival_ts) DIV {interval_us} * {interval_us} AS interval_us,
                   arrival_ts < timestamp_micros(:since) AS before_window,
                   event_type,
                   count(*) AS events,
                   unix_micros(max(arrival_ts)) AS newest_arrival_us
            FROM {events.name}
            WHERE ingest_ts >= timestamp_micros(:since)
            GROUP BY 1, 2, 3
            """,
            bound,
        ),
    }


def live_frame(
    spark: SparkSession, settings: Settings, since: datetime, now: datetime | None = None, kinesis: Any | None = None
) -> LiveFrame:
    """Look at the tables once: what was committed since ``since``, and the stream's lag.

    Args:
        spark: The session.
        settings: Names the events and rejects tables and the stream.
        since: Start of the window (naive is taken as UTC).
        now: When the look is taken (default: the wall clock).
        kinesis: A boto3 Kinesis client for the lag (default: one for ``settings``).

    Returns:
        The frame; an empty window gives empty frames and no lag, not an error.
    """
    since = as_utc(since)
    now = datetime.now(UTC) if now is None else as_utc(now)
    # Quiet tables: the dashboard asks every second or two; its statements are shown once, by the caller.
    events = LakeTable(spark, settings.table_name, echo=False)
    rejects = LakeTable(spark, settings.rejects_table_name, echo=False)
    statements = live_statements(events, rejects, since)
    snapshots, counted = look_again_if_moved(lambda: _look(events, rejects, statements))
    arrivals, newest = _arrivals(counted)
    batches, rejected = _batches(snapshots)
    return LiveFrame(
        since,
        now,
        arrivals,
        batches,
        rejected,
        newest,
        tuple(statements.values()),
        current_lag_s(spark, settings, kinesis),
    )


# Iceberg 1.12 on Spark 4.1 checks that a scan reads the snapshot its query was analysed on: a commit of
# the running ingest between the two fails the read with "Failed to enforce scan consistency" (seen in
# notebook 02's live dashboard). Nothing is wrong with the table; the look is taken again.
T = TypeVar("T")
SCAN_MOVED = "Failed to enforce scan consistency"
LOOK_ATTEMPTS = 3


def _look(events: LakeTable, rejects: LakeTable, statements: dict[str, Statement]) -> tuple[pd.DataFrame, pd.DataFrame]:
    events.run(statements["refresh_events"])
    rejects.run(statements["refresh_rejects"])
    return events.run(statements["batches"]).toPandas(), events.run(statements["arrivals"]).toPandas()


def look_again_if_moved(look: Callable[[], T]) -> T:
    """``look()``, taken again (at most :data:`LOOK_ATTEMPTS` times) when a commit moved the table under it."""
    for attempt in range(1, LOOK_ATTEMPTS + 1):
        try:
            return look()
        except Exception as error:
            if SCAN_MOVED not in str(error) or attempt == LOOK_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def current_lag_s(spark: SparkSession, settings: Settings, kinesis: Any | None = None) -> float:
    """The events table's lag behind its stream now (:func:`stream_lag_s` from its committed positions).

    Args:
        spark: The session (reads the committed positions from the snapshot summaries).
        settings: Names the events table and the stream.
        kinesis: A boto3 Kinesis client (default: one for ``settings``).

    Returns:
        Seconds; 0.0 once the stream is drained.
    """
    committed = load_committed(spark, settings.table_name, settings.stream_name).positions
    return stream_lag_s(kinesis or kinesis_client(settings), settings.stream_name, committed)


def stream_lag_s(kinesis: Any, stream_name: str, committed: Mapping[str, str]) -> float:
    """The lag (docs/glossary.md): the stream's newest arrival minus the oldest record not yet committed.

    Per open shard, one GetShardIterator at the committed position and one GetRecords of one record: its
    ``MillisBehindLatest`` is how far the shard's newest record arrived after that next record, and 0
    when there is none. Shards read to their end after a split or merge hold nothing more.

    Args:
        kinesis: A boto3 Kinesis client.
        stream_name: The stream.
        committed: Committed position per shard (:func:`icestream.ingest.positions.load_committed`);
            a shard without one is read from its oldest record.

    Returns:
        Seconds, the largest over the shards; 0.0 when every record is committed (a drained stream).
    """
    return stream_uncommitted(kinesis, stream_name, committed).lag_s


def stream_uncommitted_since(kinesis: Any, stream_name: str, committed: Mapping[str, str]) -> datetime | None:
    """When the oldest record not yet committed reached Kinesis (its ``ApproximateArrivalTimestamp``).

    A pass that drained the stream leaves only records that arrived after it began: this is how a
    notebook checks that while a producer it does not know of keeps sending (lag alone is then > 0).

    Args:
        kinesis: A boto3 Kinesis client.
        stream_name: The stream.
        committed: Committed position per shard, as for :func:`stream_lag_s`.

    Returns:
        The earliest arrival over the shards' next records (aware, UTC); None when every record is committed.
    """
    return stream_uncommitted(kinesis, stream_name, committed).since


@dataclass(frozen=True)
class Uncommitted:
    """What waits in a stream after the committed positions, from one look (one GetRecords per shard).

    Attributes:
        lag_s: The lag (:func:`stream_lag_s`); 0.0 when every record is committed.
        since: The oldest waiting record's arrival (:func:`stream_uncommitted_since`); None when none waits.
    """

    lag_s: float
    since: datetime | None


def stream_uncommitted(kinesis: Any, stream_name: str, committed: Mapping[str, str]) -> Uncommitted:
    """The lag and the oldest waiting record's arrival, both from the same answers, so they agree.

    Args:
        kinesis: A boto3 Kinesis client.
        stream_name: The stream.
        committed: Committed position per shard, as for :func:`stream_lag_s`.

    Returns:
        Both figures; a drained stream gives lag 0.0 and no arrival.
    """
    answers = _next_uncommitted(kinesis, stream_name, committed)
    behind = [answer.get("MillisBehindLatest") or 0 for answer in answers]
    arrivals = [answer["Records"][0]["ApproximateArrivalTimestamp"] for answer in answers]
    return Uncommitted(max([0, *behind]) / 1000, min(arrivals).astimezone(UTC) if arrivals else None)


def uncommitted(spark: SparkSession, settings: Settings, kinesis: Any | None = None) -> Uncommitted:
    """:func:`stream_uncommitted` for the events table's committed positions and its stream."""
    committed = load_committed(spark, settings.table_name, settings.stream_name).positions
    return stream_uncommitted(kinesis or kinesis_client(settings), settings.stream_name, committed)


def _next_uncommitted(kinesis: Any, stream_name: str, committed: Mapping[str, str]) -> list[dict[str, Any]]:
    """Per open shard with a record after its committed position, the GetRecords answer holding that one record."""
    answers = []
    for shard in list_shards(kinesis, stream_name):
        position = committed.get(shard["ShardId"], TRIM_HORIZON)
        if is_finished(position):
            continue
        arguments = iterator_arguments(position)
        iterator = kinesis.get_shard_iterator(StreamName=stream_name, ShardId=shard["ShardId"], **arguments)
        answer = kinesis.get_records(ShardIterator=iterator["ShardIterator"], Limit=1)
        if answer["Records"]:  # nothing after the position: this shard is drained, whatever the answer says
            answers.append(answer)
    return answers


def _instants(values: pd.Series, unit: Literal["us", "ms"]) -> pd.Series:
    """Epoch numbers (nullable) → aware UTC timestamps, missing where the number is."""
    import pandas as pd

    return pd.to_datetime(pd.to_numeric(values), unit=unit, utc=True)


def _batches(snapshots: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The events table's batches, each with its rejects; and all rejects committed in the window."""
    # An empty commit (a batch without rejects) has no added-records: none added.
    snapshots = snapshots.astype({"batch_id": "int64", "snapshot_id": "int64"}).fillna({"added_records": 0})
    rejects = snapshots[snapshots["written_to"] == "rejects"]
    per_batch = rejects.groupby("batch_id")["added_records"].sum().rename("rejected")
    batches = snapshots[snapshots["written_to"] == "events"].sort_values(["committed_us", "snapshot_id"])
    batches = batches.astype({"added_records": "int64"}).join(per_batch, on="batch_id")
    batches["rejected"] = batches["rejected"].fillna(0).astype("int64")
    batches["committed_at"] = _instants(batches["committed_us"], "us")
    batches["first_arrival"] = _instants(batches["first_arrival_ms"], "ms")
    batches["last_arrival"] = _instants(batches["last_arrival_ms"], "ms")
    batches["oldest_wait_s"] = (batches["committed_at"] - batches["first_arrival"]).dt.total_seconds()
    batches["newest_wait_s"] = (batches["committed_at"] - batches["last_arrival"]).dt.total_seconds()
    columns = ["batch_id", "snapshot_id", "committed_at", "added_records", "rejected", "first_arrival", "last_arrival"]
    shown = batches[[*columns, "oldest_wait_s", "newest_wait_s"]].reset_index(drop=True)
    return shown, int(rejects["added_records"].sum())


def _arrivals(rows: pd.DataFrame) -> tuple[pd.DataFrame, datetime | None]:
    newest = None if rows.empty else from_micros(int(rows["newest_arrival_us"].max()))
    arrivals = rows.assign(
        interval=_instants(rows["interval_us"], "us"), event_type=rows["event_type"].fillna(NO_TYPE)
    ).astype({"events": "int64", "before_window": "bool"})
    arrivals = arrivals.sort_values(["interval", "event_type"], ignore_index=True)
    return arrivals[["interval", "before_window", "event_type", "events"]], newest
