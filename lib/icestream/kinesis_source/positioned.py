"""``foreachBatch`` into Iceberg with the positions in each snapshot: exactly once even when the checkpoint is lost.

Iceberg's own streaming sink skips a replayed batch by the query's id and the batch's: its
exactly-once lives in Spark's checkpoint. Delete the checkpoint, and the new query has a new id
and a new start, and every record it reads again is written again. :class:`PositionedAppend`
keeps the guarantee in the table instead, the way ``icestream ingest`` does
(:mod:`icestream.ingest.positions`): each append carries, in the summary of the snapshot that adds
its rows, where every shard stands after it. A batch first drops its rows at or before those
positions, so a replay writes nothing twice, whatever checkpoint it comes from; and a query started
with ``startingPosition`` = :func:`starting_positions` continues exactly where the table is.

With a rejects table, rows that fail ``valid`` (by default: ``from_json`` gave no ``event_id``) go
there instead, once: the two tables commit one after the other, each with its own positions, so a
crash between the two commits re-writes neither. The batch's rows need ``shard_id`` and
``sequence_number`` columns (the source's ``shardId`` and ``sequenceNumber``, named as icestream's
tables name them): the positions are found from them, and, after snapshot expiry, in them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icestream.ingest import positions as pos
from icestream.ingest.commits import SNAPSHOT_PROPERTY
from icestream.lake.summary import BATCH_KEY, POSITIONS_KEY, STREAM_KEY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def starting_positions(spark: object, table: str, stream_name: str) -> str:
    """The table's committed positions as the source's ``startingPosition`` (JSON; ``trim_horizon`` when none)."""
    committed = pos.load_committed(spark, table, stream_name)  # type: ignore[arg-type]
    return pos.encode_positions(committed.positions) if committed.positions else "trim_horizon"


def after_positions(positions: dict[str, str]) -> str:
    """A SQL condition true for rows past ``positions`` (a shard not in them: every row)."""
    kept = []
    for shard, position in sorted(positions.items()):
        sequence = pos.last_sequence(position)
        if sequence is None:
            continue
        if not sequence.isdigit() or not shard.replace("-", "").isalnum():
            raise ValueError(f"not a shard position: {shard!r} {position!r}")
        # Numeric order of sequence-number strings: longer is larger, then lexicographic.
        kept.append(
            f"(shard_id = '{shard}' AND (length(sequence_number) < {len(sequence)} OR "
            f"(length(sequence_number) = {len(sequence)} AND sequence_number <= '{sequence}')))"
        )
    return f"NOT ({' OR '.join(kept)})" if kept else "true"


def batch_ends(rows: DataFrame) -> dict[str, str]:
    """Per shard, the position after the batch's last record (a batch ends after a whole record)."""
    found = (
        rows.selectExpr(
            "shard_id", "named_struct('length', length(sequence_number), 'value', sequence_number) AS sequence"
        )
        .groupBy("shard_id")
        .agg({"sequence": "max"})
    )
    return {row[0]: pos.after(row[1]["value"]) for row in found.collect()}


class PositionedAppend:
    """A ``foreachBatch`` function: append each batch past the table's positions, with its new ones."""

    def __init__(
        self, table: str, stream_name: str, rejects_table: str | None = None, valid: str = "event_id IS NOT NULL"
    ) -> None:
        """
        Args:
            table: The events table (qualified name).
            stream_name: The Kinesis stream (the positions belong to it).
            rejects_table: Where rows failing ``valid`` go (None: every row goes to ``table``).
            valid: A SQL condition: true for the rows ``table`` takes.
        """
        self.table = table
        self.stream_name = stream_name
        self.rejects_table = rejects_table
        self.valid = valid

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()  # a foreachBatch frame is recomputed by each action: read it once
        try:
            ends = batch_ends(batch)
            if not ends:
                return
            if self.rejects_table is not None:
                self._append(self.rejects_table, batch.where(f"NOT coalesce({self.valid}, false)"), ends, batch_id)
                self._append(self.table, batch.where(f"coalesce({self.valid}, false)"), ends, batch_id)
            else:
                self._append(self.table, batch, ends, batch_id)
        finally:
            batch.unpersist()

    def _append(self, table: str, rows: DataFrame, ends: dict[str, str], batch_id: int) -> None:
        committed = pos.load_committed(rows.sparkSession, table, self.stream_name).positions
        # Never back: a query started from the stream's start (its checkpoint lost) re-reads what is committed.
        positions = {**committed, **pos.furthest(ends, committed)}
        if positions == committed:
            return  # a replay of a batch this table holds already
        (
            rows.where(after_positions(committed))
            .writeTo(table)
            .option(f"{SNAPSHOT_PROPERTY}{POSITIONS_KEY}", pos.encode_positions(positions))
            .option(f"{SNAPSHOT_PROPERTY}{STREAM_KEY}", self.stream_name)
            .option(f"{SNAPSHOT_PROPERTY}{BATCH_KEY}", str(batch_id))
            .append()
        )
