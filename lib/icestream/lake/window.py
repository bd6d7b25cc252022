"""Windows of event time, and the event-time range of a table.

A window's bounds reach SQL as bound epoch microseconds wrapped in ``timestamp_micros(...)``, which
Spark folds into literals before planning, so Iceberg maps ``event_ts > <literal>`` onto the hidden
``hours(event_ts)`` partition and skips the other hours' files (see :mod:`icestream.queries.realtime`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from icestream.errors import ConfigError
from icestream.lake.statement import Statement
from icestream.runtime.handles import first_row
from icestream.timestamps import from_micros, to_micros

if TYPE_CHECKING:
    from pyspark.sql import Column

    from icestream.lake.table import LakeTable

WINDOW_SQL = "event_ts > timestamp_micros(:start) AND event_ts <= timestamp_micros(:end)"


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
