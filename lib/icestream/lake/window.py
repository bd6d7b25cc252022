"""Windows of event time, and the event-time range of a table.

A window's bounds reach SQL as bound epoch microseconds wrapped in ``timestamp_micros(...)``, which
Spark folds into literals before planning, so Iceberg maps ``event_ts > <literal>`` onto the hidden
``hours(event_ts)`` partition and skips the other hours' files (see :mod:`icestream.queries.realtime`).

**Which events set "now".** A window's default end is the newest *trusted* event time: the newest
``event_ts`` no more than :data:`ARRIVAL_TOLERANCE` (5 minutes) after the event's own arrival (its
``arrival_ts``: Kinesis' ApproximateArrivalTimestamp; ``ingest_ts`` where a load left it null). An
event time is the producer's clock, so one bad clock or one bogus value (``9999-12-31``) would
otherwise move every default window to where no other event is. Such an event is kept in the table
(nothing is dropped) and counted by every window that holds it; it only cannot set "now".
:data:`TRUSTED_EVENT_SQL` is that rule in SQL, :func:`trusted` in Arrow, the same in every engine.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from icestream.errors import ConfigError
from icestream.lake.statement import Statement
from icestream.runtime.handles import first_row
from icestream.timestamps import from_micros, to_micros

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

    from icestream.lake.table import LakeTable

WINDOW_SQL = "event_ts > timestamp_micros(:start) AND event_ts <= timestamp_micros(:end)"

# How far an event time may run ahead of its arrival and still set a window's default end: producers'
# clocks drift by seconds, not minutes; a bound of minutes keeps one bogus time from setting "now".
ARRIVAL_TOLERANCE = timedelta(minutes=5)
ARRIVAL_TOLERANCE_US = int(ARRIVAL_TOLERANCE / timedelta(microseconds=1))


def trusted_event_sql(micros: str = "unix_micros") -> str:
    """The condition "this event's time may set now" in one engine's dialect (see the module docstring).

    Args:
        micros: The engine's timestamp → epoch microseconds function (``unix_micros``, ``epoch_us``).
    """
    arrival = f"coalesce({micros}(arrival_ts), {micros}(ingest_ts), {micros}(event_ts))"
    return f"{micros}(event_ts) <= {arrival} + {ARRIVAL_TOLERANCE_US}"


TRUSTED_EVENT_SQL = trusted_event_sql()


def trusted(rows: pa.Table) -> pa.Array:
    """:data:`TRUSTED_EVENT_SQL` over Arrow rows holding ``event_ts``, ``arrival_ts`` and ``ingest_ts``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def micros(column: str) -> pa.Array:
        return pc.cast(pc.cast(rows[column], pa.timestamp("us", "UTC")), pa.int64())

    arrival = pc.coalesce(micros("arrival_ts"), micros("ingest_ts"), micros("event_ts"))
    return pc.less_equal(micros("event_ts"), pc.add(arrival, ARRIVAL_TOLERANCE_US))


@dataclass(frozen=True)
class Window:
    """A time window ``(start, end]`` of event time, both aware UTC datetimes."""

    start: datetime
    end: datetime

    @property
    def args(self) -> dict[str, int]:
        """Bound parameters ``start``/``end`` of :data:`WINDOW_SQL`, in epoch microseconds."""
        return {"start": to_micros(self.start), "end": to_micros(self.end)}

    def condition(self) -> Column:
        """The window as a Spark Column condition on ``event_ts`` (prunes like :data:`WINDOW_SQL`)."""
        from pyspark.sql import functions as F  # noqa: N812 - the usual alias

        return (F.col("event_ts") > F.timestamp_micros(F.lit(to_micros(self.start)))) & (
            F.col("event_ts") <= F.timestamp_micros(F.lit(to_micros(self.end)))
        )


def event_time_range(table: LakeTable) -> tuple[datetime | None, datetime | None]:
    """The table's oldest and newest ``event_ts`` (UTC), both None when it is empty."""
    row = first_row(
        table.run(
            Statement(
                f"SELECT unix_micros(min(event_ts)) AS oldest, unix_micros(max(event_ts)) AS newest FROM {table.name}"
            )
        )
    )
    if row.newest is None:
        return None, None
    return from_micros(row.oldest), from_micros(row.newest)


def event_time_slices(table: LakeTable, parts: int) -> list[Window]:
    """Split the table's event-time range into ``parts`` equal windows, oldest first.

    Raises:
        ConfigError: If ``parts`` < 1 or the table is empty.
    """
    if parts < 1:
        raise ConfigError(f"parts: {parts} must be at least 1.")
    oldest, newest = event_time_range(table)
    if oldest is None or newest is None:
        raise ConfigError(f"{table.name} has no events to copy: run the ingest (02_stream_ingest) first.")
    low, high = to_micros(oldest), to_micros(newest)
    start, step = low - 1, (high - low + 1) / parts
    edges = [start + round(step * index) for index in range(parts)] + [high]
    return [Window(from_micros(a), from_micros(b)) for a, b in itertools.pairwise(edges)]
