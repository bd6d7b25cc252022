"""One commit of the ingest to one table: rows and, in the same snapshot, the positions they reach.

Every commit's snapshot summary names the stream (and its incarnation), the query and the batch
beside the per-shard positions (the keys are in :mod:`icestream.lake.summary`): recovery reads
them back (:mod:`icestream.ingest.positions`), and the query finds its own snapshot by them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from icestream.ingest import positions as pos
from icestream.ingest import schema_evolution as evo
from icestream.ingest.changes import ChangeSpec, apply_changes
from icestream.lake.inspect import ancestry
from icestream.lake.summary import BATCH_KEY, CREATED_KEY, POSITIONS_KEY, QUERY_KEY, STREAM_KEY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SNAPSHOT_PROPERTY = "snapshot-property."  # a write option with this prefix becomes a snapshot summary key
# Rows one write task takes: a batch at the default cap (10,000 per shard) is one task per table.
# A hash shuffle first (the tables' own write.distribution-mode) cost about 0.2 s per batch here.
WRITE_ROWS_PER_TASK = 250_000


@dataclass
class WrittenTable:
    """One table the sink writes, and what it knows of the table's commits."""

    name: str
    committed: dict[str, str] = field(default_factory=dict)  # the positions its last commit carried
    last_commit: float = 0.0  # time.monotonic() of this query's last commit to it


@dataclass(frozen=True)
class Appended:
    """One commit of this query: its snapshot (None if it cannot be found) and the rows it added."""

    snapshot_id: int | None
    rows: int


@dataclass(frozen=True)
class CommitStamp:
    """What every commit of one query says of where its rows come from."""

    stream_name: str
    stream_created: str  # the stream's creation time: tells one incarnation of a name from another
    query_id: str


def commit_due(table: WrittenTable, new_rows: int, positions: dict[str, str], every_seconds: float) -> bool:
    """Whether ``table`` commits in this batch: it gets rows, or its positions moved and are due.

    A table that gets no rows (e.g. the rejects table of a clean stream) still commits its positions
    every ``every_seconds``, so a restart does not re-read far back.
    """
    due = time.monotonic() - table.last_commit >= every_seconds
    return new_rows > 0 or (due and positions != table.committed)


def commit_properties(
    stamp: CommitStamp, positions: dict[str, str], batch_id: int, arrivals: dict[str, str], schema_change: str | None
) -> dict[str, str]:
    """The write options of one commit: its snapshot summary, and how the rows reach the writers.

    Args:
        stamp: The query's stamp.
        positions: Where every shard stands once the commit is in.
        batch_id: The batch it commits.
        arrivals: The batch's first and last arrival (only a commit with rows has a batch to measure).
        schema_change: The columns its table gained for this batch, named once (None: none).
    """
    properties = {
        f"{SNAPSHOT_PROPERTY}{POSITIONS_KEY}": pos.encode_positions(positions),
        f"{SNAPSHOT_PROPERTY}{STREAM_KEY}": stamp.stream_name,
        f"{SNAPSHOT_PROPERTY}{BATCH_KEY}": str(batch_id),
        f"{SNAPSHOT_PROPERTY}{QUERY_KEY}": stamp.query_id,
        f"{SNAPSHOT_PROPERTY}{CREATED_KEY}": stamp.stream_created,
        # No shuffle before the write: the kept rows go straight to the writers, one task per
        # WRITE_ROWS_PER_TASK rows, and fanout writers give one file per partition a task
        # touches (a batch's events are a few hours at most; its rejects one day).
        "distribution-mode": "none",
    }
    properties.update({f"{SNAPSHOT_PROPERTY}{key}": value for key, value in arrivals.items()})
    if schema_change is not None:
        properties[f"{SNAPSHOT_PROPERTY}{evo.ADDED_KEY}"] = schema_change
    return properties


def find_commit(spark: SparkSession, table: str, query_id: str, batch_id: int) -> Appended:
    """This query's snapshot of ``batch_id`` in ``table``: its id and added-records (another writer may
    have committed after it)."""
    for snapshot in ancestry(spark, table):
        summary = snapshot.summary()
        if summary.get(QUERY_KEY) == query_id and summary.get(BATCH_KEY) == str(batch_id):
            return Appended(int(snapshot.snapshotId()), int(summary.get("added-records") or 0))
    return Appended(None, 0)


class TableWriter:
    """Commits rows to one table at a time, each commit carrying the positions the rows reach."""

    def __init__(
        self, spark: SparkSession, stamp: CommitStamp, every_seconds: float, changes: ChangeSpec | None, keyed: str
    ) -> None:
        """Keep what every commit of the query needs.

        Args:
            spark: The session.
            stamp: What every commit says of where its rows come from.
            every_seconds: How often a table without rows commits moved positions (``position_commit_seconds``).
            changes: A change stream's declaration (None: an event stream): its rows are merged into ``keyed``.
            keyed: The table a change stream's rows are merged into (the events table).
        """
        self.spark = spark
        self.stamp = stamp
        self.every_seconds = every_seconds
        self.changes = changes
        self.keyed = keyed
        self.schema_changes: dict[str, str] = {}  # per table: the changes its next data commit names

    def due(self, table: WrittenTable, new_rows: int, positions: dict[str, str]) -> bool:
        """:func:`commit_due` at this query's interval."""
        return commit_due(table, new_rows, positions, self.every_seconds)

    def append(
        self,
        table: WrittenTable,
        frame: DataFrame,
        new_rows: int,
        positions: dict[str, str],
        batch_id: int,
        arrivals: dict[str, str],
    ) -> Appended | None:
        """Commit ``frame`` with ``positions``; or nothing, if it has no new rows and no position is due.

        A commit of positions only carries no ``arrivals``: its snapshot holds no batch to measure the lag of.
        """
        if not self.due(table, new_rows, positions):
            return None
        return self.write(table, frame, new_rows, positions, batch_id, arrivals)

    def write(
        self,
        table: WrittenTable,
        frame: DataFrame,
        new_rows: int,
        positions: dict[str, str],
        batch_id: int,
        arrivals: dict[str, str],
    ) -> Appended:
        """Append ``frame`` to ``table`` in one commit whose snapshot summary carries ``positions``."""
        properties = commit_properties(
            self.stamp, positions, batch_id, arrivals if new_rows > 0 else {}, self.schema_changes.get(table.name)
        )
        merged = self.changes is not None and table.name == self.keyed
        if merged and new_rows > 0:
            assert self.changes is not None
            summary = {
                key.removeprefix(SNAPSHOT_PROPERTY): value
                for key, value in properties.items()
                if key.startswith(SNAPSHOT_PROPERTY)
            }
            apply_changes(self.spark, table.name, frame, self.changes, summary)  # one MERGE, the positions in it
        else:
            tasks = max(1, -(-new_rows // WRITE_ROWS_PER_TASK))
            frame.coalesce(tasks).writeTo(table.name).options(**properties).append()
        table.last_commit = time.monotonic()
        table.committed = dict(positions)
        self.schema_changes.pop(table.name, None)
        appended = find_commit(self.spark, table.name, self.stamp.query_id, batch_id)
        # A MERGE's added-records counts rewritten rows too: a change stream counts the changes it applied.
        return Appended(appended.snapshot_id, new_rows) if merged else appended
