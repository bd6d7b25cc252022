"""What the sink writes into each snapshot's summary beside the rows (no JVM: the write is faked)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from icestream.ingest import commits
from icestream.ingest.commits import Appended, CommitStamp, TableWriter, WrittenTable
from icestream.ingest.progress import arrival_properties
from icestream.ingest.reading.read_stats import ReadStats
from icestream.ingest.schema_evolution import ADDED_KEY
from icestream.lake.summary import FIRST_ARRIVAL_KEY, LAST_ARRIVAL_KEY


class FakeWrite:
    """Records the options of ``frame.coalesce(n).writeTo(name).options(...).append()``."""

    def __init__(self) -> None:
        self.appended: list[dict[str, Any]] = []

    def coalesce(self, tasks: int) -> FakeWrite:
        return self

    def writeTo(self, name: str) -> FakeWrite:  # noqa: N802 - Spark's name
        return self

    def options(self, **options: Any) -> FakeWrite:
        self._options = options
        return self

    def append(self) -> None:
        self.appended.append(self._options)


def writer_of(monkeypatch: pytest.MonkeyPatch, every_seconds: float = 0.0) -> TableWriter:
    monkeypatch.setattr(commits, "find_commit", lambda spark, table, query_id, batch_id: Appended(1, 0))
    stamp = CommitStamp("s", "1.000", "query")
    return TableWriter(None, stamp, every_seconds, None, "lake.db.events")  # type: ignore[arg-type]


def test_the_batchs_first_and_last_arrival_are_epoch_milliseconds_over_all_shards() -> None:
    shards = [
        ReadStats("shardId-000000000000", first_arrival=1_800_000_000.25, last_arrival=1_800_000_004.5),
        ReadStats("shardId-000000000001", first_arrival=1_799_999_999.0, last_arrival=1_800_000_001.0),
        ReadStats("shardId-000000000002"),  # read nothing
    ]
    assert arrival_properties(shards) == {FIRST_ARRIVAL_KEY: "1799999999000", LAST_ARRIVAL_KEY: "1800000004500"}
    assert arrival_properties([ReadStats("shardId-000000000000")]) == {}


def test_a_commit_with_rows_carries_the_arrivals_and_a_position_only_commit_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    writer, frame = writer_of(monkeypatch), FakeWrite()
    table = WrittenTable("lake.db.events")
    arrivals = {FIRST_ARRIVAL_KEY: "1799999999000", LAST_ARRIVAL_KEY: "1800000004500"}
    writer.append(table, frame, 3, {"shardId-000000000000": "AFTER:3"}, 7, arrivals)  # type: ignore[arg-type]
    writer.append(table, frame, 0, {"shardId-000000000000": "AFTER:9"}, 8, arrivals)  # type: ignore[arg-type]
    with_rows, position_only = frame.appended
    assert with_rows[f"snapshot-property.{FIRST_ARRIVAL_KEY}"] == "1799999999000"
    assert with_rows[f"snapshot-property.{LAST_ARRIVAL_KEY}"] == "1800000004500"
    assert not any(key.endswith(("first-arrival-ms", "last-arrival-ms")) for key in position_only)
    assert position_only["snapshot-property.icestream.batch-id"] == "8", "the position commit itself happened"


def test_the_commit_after_a_schema_change_names_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    writer, frame = writer_of(monkeypatch), FakeWrite()
    table = WrittenTable("lake.db.events")
    writer.schema_changes[table.name] = "coupon string,qty bigint"
    writer.append(table, frame, 3, {"shardId-000000000000": "AFTER:3"}, 7, {})  # type: ignore[arg-type]
    writer.append(table, frame, 2, {"shardId-000000000000": "AFTER:5"}, 8, {})  # type: ignore[arg-type]
    changed, next_batch = frame.appended
    assert changed[f"snapshot-property.{ADDED_KEY}"] == "coupon string,qty bigint"
    assert f"snapshot-property.{ADDED_KEY}" not in next_batch


def test_a_table_without_new_rows_commits_only_moved_positions_once_they_are_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The rejects of a clean batch: its frame is not even built unless a commit is due.
    writer = writer_of(monkeypatch, every_seconds=3600.0)
    table = WrittenTable("lake.db.rejects", committed={"shardId-000000000000": "AFTER:3"}, last_commit=time.monotonic())
    moved = {"shardId-000000000000": "AFTER:9"}
    assert writer.due(table, 1, dict(table.committed)), "new rows always commit"
    assert not writer.due(table, 0, moved), "moved positions wait until they are due"
    table.last_commit -= 3600.0
    assert writer.due(table, 0, moved), "then they commit, without rows"
    assert not writer.due(table, 0, dict(table.committed)), "unmoved positions never commit on their own"
