"""real_time_metrics in tests: the truth from the records sent, and the metrics table as DuckDB reads it
(shared by the integration tests and the SIGKILL campaign)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from icestream.lake.table import LakeTable
from icestream.queries import duckdb_engine as duck

Group = tuple[int, str | None, str | None]  # minute (epoch microseconds), event_type, device_type
Answer = tuple[int, int, float | None]  # events, unique users, average duration_ms


def truth(payloads: Iterable[bytes]) -> dict[Group, Answer]:
    """real_time_metrics of the distinct events among ``payloads`` (the first copy of an id counts), in Python.

    Give it the payloads of the generator's events (``record.kind == "event"``, repeats included).
    """
    seen: set[str] = set()
    users: dict[Group, set[str]] = defaultdict(set)
    events: dict[Group, int] = defaultdict(int)
    durations: dict[Group, list[float]] = defaultdict(list)
    for payload in payloads:
        event = json.loads(payload)
        moment = datetime.fromisoformat(event["event_ts"].replace("Z", "+00:00"))
        if event["event_id"] in seen:
            continue
        seen.add(event["event_id"])
        minute = int(moment.replace(second=0, microsecond=0).timestamp()) * 1_000_000
        device = (event.get("device_info") or {}).get("device_type")
        group = (minute, event.get("event_type"), device)
        events[group] += 1
        users[group].add(event["user_id"])
        duration = (event.get("properties") or {}).get("duration_ms")
        if duration is not None:
            durations[group].append(float(duration))
    return {
        group: (count, len(users[group]), sum(durations[group]) / len(durations[group]) if durations[group] else None)
        for group, count in events.items()
    }


def duckdb_metrics(table: LakeTable) -> dict[Group, Answer]:
    """The metrics table as DuckDB reads its current metadata (delete files applied by DuckDB)."""
    return _read(table, "SELECT epoch_us(minute), event_type, device_type, events, unique_users, avg_duration_ms "
                        "FROM iceberg_scan('{location}')")  # fmt: skip


def duckdb_full_query(table: LakeTable) -> dict[Group, Answer]:
    """real_time_metrics computed by DuckDB from the events table itself."""
    return _read(
        table,
        "SELECT epoch_us(date_trunc('minute', event_ts)), event_type, device_info.device_type, count(*), "
        "count(DISTINCT user_id), avg(TRY_CAST(properties['duration_ms'] AS DOUBLE)) "
        "FROM iceberg_scan('{location}') GROUP BY ALL",
    )


def _read(table: LakeTable, sql: str) -> dict[Group, Answer]:
    location, _ = table.inspect.metadata_location()
    connection = duck.connect()
    try:
        rows: list[Any] = connection.execute(sql.format(location=location)).fetchall()
    finally:
        connection.close()
    return {(int(row[0]), row[1], row[2]): (int(row[3]), int(row[4]), row[5]) for row in rows}
