"""Per-shard positions: how they are written and found again (a read plan is made of them in ``reading.shard_plan``).

A position is a short string per shard:

- ``TRIM_HORIZON`` or ``AT_TIMESTAMP:<epoch seconds>``: nothing read yet, start there;
- ``AFTER:<sequence number>``: everything up to and including that record is done;
- ``AFTER:<sequence number>:<sub-sequence number>``: that record is a KPL aggregate and its user
  records up to and including that index are done (a batch ended inside it); the rest of it is not;
- ``END:<sequence number or empty>``: the shard is closed and was read to its end.

Each table the ingest writes carries its own positions in the summary of the very snapshot that
adds the batch's rows (``icestream.positions``), so data and position commit atomically.

Finding them again must survive table maintenance (Iceberg issue 5846: the Flink sink lost its
place after compaction and snapshot expiry). Two rules make that impossible here:

1. Walk the *ancestry* of the current snapshot and take the newest snapshot that carries
   positions for this stream: compaction's ``replace`` snapshots are simply skipped.
2. If expiry removed every snapshot that carried positions, derive them from the data itself: the
   highest sequence number per shard among the table's rows. That is exact, not a guess: the
   positions committed with a batch never run ahead of the table's rows except over records
   that table does not keep (rejects in the events table, events in the rejects table,
   duplicates), and re-reading those writes nothing to that table (duplicates are caught again
   by deduplication against committed rows). A table property ``icestream.source-stream`` records
   which stream feeds the table, so data from another stream is never mistaken for ours.
   Rows carry no sub-sequence number, so a derived position is always after a whole record: if
   the last positioned snapshot had ended inside a KPL aggregate and expired, the rest of that
   aggregate would be skipped (maintenance keeps that snapshot: ``keep_positions_of``).

Positions belong to one *incarnation* of a stream. A stream deleted and created again under the
same name (or an in-memory emulator restarted) has the same shard ids but sequence numbers that
start over, so old positions would silently skip its first records. Every commit therefore also
records the stream's creation time (``icestream.kinesis-created``, and a table property for the
derived path); positions of another incarnation are ignored and the new stream is read afresh.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from icestream.lake.ddl import checked_table_name
from icestream.lake.inspect import ancestry, load_iceberg_table
from icestream.lake.summary import BATCH_KEY, CREATED_KEY, POSITIONS_KEY, STREAM_KEY

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCE_PROPERTY = "icestream.source-stream"
SOURCE_CREATED_PROPERTY = "icestream.source-stream-created"

TRIM_HORIZON = "TRIM_HORIZON"


def after(sequence_number: str, sub: int | None = None) -> str:
    """Position just after a record, or after user record ``sub`` of an aggregate."""
    return f"AFTER:{sequence_number}" if sub is None else f"AFTER:{sequence_number}:{sub}"


def at_timestamp(moment: datetime) -> str:
    """Position at the first record that arrived at or after ``moment``."""
    return f"AT_TIMESTAMP:{moment.timestamp():.3f}"


def ended(sequence_number: str | None) -> str:
    """Position of a closed shard read to its end."""
    return f"END:{sequence_number or ''}"


def iterator_arguments(position: str) -> dict[str, Any]:
    """GetShardIterator's arguments that resume a shard at ``position`` (the next record not committed)."""
    kind, _, value = position.partition(":")
    if kind == "AFTER" and last_sub(position) is not None:  # inside an aggregate: read it again
        return {"ShardIteratorType": "AT_SEQUENCE_NUMBER", "StartingSequenceNumber": last_sequence(position)}
    if kind == "AFTER":
        return {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "StartingSequenceNumber": value}
    if kind == "AT_TIMESTAMP":
        return {"ShardIteratorType": "AT_TIMESTAMP", "Timestamp": datetime.fromtimestamp(float(value), UTC)}
    return {"ShardIteratorType": "TRIM_HORIZON"}


def is_finished(position: str | None) -> bool:
    """True for a closed shard read to its end."""
    return position is not None and position.startswith("END:")


def committed_mark(position: str | None) -> str | None:
    """What a position covers: ``<sequence number>`` or ``<sequence number>:<sub>`` (None: nothing)."""
    if position and position.startswith(("AFTER:", "END:")):
        return position.split(":", 1)[1] or None
    return None


def last_sequence(position: str | None) -> str | None:
    """The sequence number of the last record a position covers, wholly or in part (None: nothing)."""
    mark = committed_mark(position)
    return mark.split(":", 1)[0] if mark else None


def last_sub(position: str | None) -> int | None:
    """The last user record done inside an aggregate the position ends in (None: ends after a record)."""
    mark = committed_mark(position)
    return int(mark.split(":", 1)[1]) if mark and ":" in mark else None


def sequence_key(sequence_number: str | None) -> int:
    """Kinesis sequence numbers are decimal strings of up to 128 digits: compare them as integers."""
    return int(sequence_number) if sequence_number else -1


WHOLE = float("inf")  # the sub-sequence key of a whole record: after every user record it holds


def record_key(sequence_number: str, sub: int | None) -> tuple[int, float]:
    """Order of a (user) record: by sequence number, then sub-sequence; a record that is not an
    aggregate (``sub`` None) sorts as its whole self."""
    return int(sequence_number), WHOLE if sub is None else sub


def mark_key(mark: str | None) -> tuple[int, float]:
    """Order of a :func:`committed_mark` (None, nothing done, is before every record)."""
    if not mark:
        return -1, WHOLE
    sequence, _, sub = mark.partition(":")
    return record_key(sequence, int(sub) if sub else None)


def earliest(first: str | None, second: str | None) -> str | None:
    """The position that is further behind (None, "nothing committed", is furthest behind)."""
    if first is None or second is None:
        return None
    if is_finished(first) and is_finished(second):
        return first
    if is_finished(first):
        return second
    if is_finished(second):
        return first
    first_mark, second_mark = committed_mark(first), committed_mark(second)
    if first_mark is None or second_mark is None:
        return first if first_mark is None else second
    return first if mark_key(first_mark) <= mark_key(second_mark) else second


@dataclass(frozen=True)
class Committed:
    """What one table says it has committed."""

    positions: dict[str, str]
    batch_id: int
    snapshot_id: int | None
    source: str  # "snapshot", "data" (derived after expiry), "none" or "stream recreated"


def encode_positions(positions: Mapping[str, str]) -> str:
    """Positions as the compact JSON stored in a snapshot summary."""
    return json.dumps(dict(sorted(positions.items())), separators=(",", ":"))


def load_committed(spark: SparkSession, table: str, stream_name: str, stream_created: str | None = None) -> Committed:
    """Find the positions a table has committed for a stream (see the module docstring).

    Args:
        spark: The session.
        table: Qualified table name.
        stream_name: The Kinesis stream whose positions to find.
        stream_created: The stream's creation time (epoch seconds, as text); positions recorded for
            another creation time belong to an earlier stream of the same name and are ignored.

    Returns:
        The committed positions, the last batch id and where they came from.
    """
    table = checked_table_name(table)
    current = None
    for snapshot in ancestry(spark, table):
        snapshot_id, summary = int(snapshot.snapshotId()), snapshot.summary()
        current = snapshot_id if current is None else current
        positions = summary.get(POSITIONS_KEY)
        if positions is not None and summary.get(STREAM_KEY) == stream_name:
            batch_id = int(summary.get(BATCH_KEY))
            if _other_incarnation(summary.get(CREATED_KEY), stream_created):
                return Committed({}, batch_id, snapshot_id, "stream recreated")
            return Committed(json.loads(positions), batch_id, snapshot_id, "snapshot")
    if current is None:
        return Committed({}, -1, None, "none")
    return _derive_from_data(spark, table, stream_name, current, stream_created)


def _other_incarnation(recorded: str | None, current: str | None) -> bool:
    # Tables written before creation times were recorded count as the same stream.
    return recorded is not None and current is not None and recorded != current


def _derive_from_data(
    spark: SparkSession, table: str, stream_name: str, current: int, stream_created: str | None
) -> Committed:
    properties = {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    source = properties.get(SOURCE_PROPERTY)
    if source is None:
        return Committed({}, -1, current, "none")
    if source == stream_name and _other_incarnation(properties.get(SOURCE_CREATED_PROPERTY), stream_created):
        return Committed({}, -1, current, "stream recreated")
    if source != stream_name:
        from icestream.errors import ConfigError

        raise ConfigError(fed_by_another(table, source, stream_name))
    # Numeric order of sequence-number strings: longer is larger, then lexicographic.
    rows = spark.sql(
        f"SELECT shard_id, max(named_struct('length', length(sequence_number), 'value', sequence_number)).value "
        f"AS last_sequence FROM {table} GROUP BY shard_id"
    ).collect()
    positions = {row.shard_id: after(row.last_sequence) for row in rows}
    return Committed(positions, -1, current, "data" if positions else "none")


def fed_by_another(table: str, source: str, stream_name: str) -> str:
    """What the ingest and reset say of ``table``, which stream ``source`` feeds, when asked for ``stream_name``."""
    return (
        f"{table} is fed by stream {source!r}, not {stream_name!r}. Use another table "
        "(ICESTREAM_TABLE) or the stream that feeds it (ICESTREAM_STREAM_NAME)."
    )


def source_stream(spark: SparkSession, table: str) -> str | None:
    """The stream recorded as feeding ``table`` (:data:`SOURCE_PROPERTY`), None when none is."""
    return load_iceberg_table(spark, checked_table_name(table)).properties().get(SOURCE_PROPERTY)


def mark_source_stream(spark: SparkSession, table: str, stream_name: str, stream_created: str | None = None) -> None:
    """Record which stream (and incarnation) feeds the table: table properties survive maintenance.

    Read and set through Iceberg's table API, not ``SHOW TBLPROPERTIES`` and ``ALTER TABLE``: in the
    fresh JVM of a drain those were its first SQL commands to parse, analyse and plan. For the events
    and rejects tables, already marked, they took 0.86-0.93 CPU-seconds of a new driver JVM, the
    table API 0.03-0.05 (3 processes each, 2026-11-27).
    """
    table = checked_table_name(table)
    wanted = {SOURCE_PROPERTY: stream_name}
    if stream_created is not None:
        if not re.fullmatch(r"\d+(\.\d+)?", stream_created):
            raise ValueError(f"not a creation time: {stream_created!r}")
        wanted[SOURCE_CREATED_PROPERTY] = stream_created
    iceberg = load_iceberg_table(spark, table)
    properties = iceberg.properties()
    if any(properties.get(key) != value for key, value in wanted.items()):
        update = iceberg.updateProperties()
        for key, value in wanted.items():
            update = update.set(key, value)
        update.commit()


def earliest_of(tables: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """Per shard, the position furthest behind among ``tables`` (routed tables: reading starts there).

    A shard missing from any table is left out: that table committed nothing there, so nothing of it
    counts as done (the plan then reads the shard as a table with no position).
    """
    tables = list(tables)
    if not tables:
        return {}
    combined = {}
    for shard in set.intersection(*(set(table) for table in tables)):
        position: str | None = tables[0][shard]
        for table in tables[1:]:
            position = earliest(position, table[shard])
        if position is not None:
            combined[shard] = position
    return combined


def inside_aggregates(tables: Iterable[Mapping[str, str]]) -> dict[str, tuple[str, ...]]:
    """Per shard, the sequence numbers of the aggregates the tables' positions end inside."""
    inside: dict[str, set[str]] = {}
    for table in tables:
        for shard, position in table.items():
            if last_sub(position) is not None and not is_finished(position):
                inside.setdefault(shard, set()).add(str(last_sequence(position)))
    return {shard: tuple(sorted(sequences)) for shard, sequences in inside.items()}


def furthest(positions: dict[str, str], committed: dict[str, str]) -> dict[str, str]:
    """Per shard, the further of ``positions`` and what the archive committed.

    After a crash the batch re-reads from the events' position, which may be behind the archive's
    (it commits first): its commit must not move the archive's position back, or records it already
    holds would be archived again.
    """

    def order(position: str | None) -> tuple[int, tuple[int, float]]:
        return (1, (0, 0.0)) if is_finished(position) else (0, mark_key(committed_mark(position)))

    return {
        shard: committed[shard] if shard in committed and order(committed[shard]) > order(position) else position
        for shard, position in positions.items()
    }
