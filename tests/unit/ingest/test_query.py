"""The query handle's loop with a fake source and sink (no JVM, no Kinesis): retries and stop."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from icestream.config import load_settings
from icestream.errors import IngestError, ShardReadError
from icestream.ingest import batch_retry
from icestream.ingest.options import MIN_TRIGGER_SECONDS, IngestOptions
from icestream.ingest.query import IngestParts, IngestQuery
from icestream.ingest.reading.planner import TablePositions
from icestream.ingest.sink import Recovered


class FakeSparkContext:
    def setLocalProperty(self, key: str, value: str) -> None:  # noqa: N802 - Spark's name
        pass

    def setJobGroup(self, group: str, description: str) -> None:  # noqa: N802 - Spark's name
        pass


class FakeSpark:
    sparkContext = FakeSparkContext()  # noqa: N815 - Spark's name


class FakeSource:
    """Every read fails with ``error``; counts the reads."""

    error: BaseException

    def __init__(self, *args: Any) -> None:
        self.stream_created = "1700000000.000"
        self.reads = 0
        self.failed = threading.Event()
        self.closed = False

    def next_read(self, batch_id: int, processed: TablePositions, committed: TablePositions) -> None:
        self.reads += 1
        self.failed.set()
        raise self.error

    def reset(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class FakeSink:
    def __init__(self, *args: Any) -> None:
        self.committed = TablePositions()

    def recover(self) -> Recovered:
        return Recovered(TablePositions(), {"events": "none", "rejects": "none"}, 0)

    def mark_source(self) -> None:
        pass


class FakeLease:
    """Records the lease steps the query takes."""

    def __init__(self, *args: Any) -> None:
        self.steps: list[str] = []

    def acquire(self) -> None:
        self.steps.append("acquire")

    def renew(self) -> None:
        self.steps.append("renew")

    def release(self) -> None:
        self.steps.append("release")


@pytest.fixture
def make_query(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    def make(error: BaseException, **options: Any) -> IngestQuery:
        monkeypatch.setattr(FakeSource, "error", error, raising=False)
        chosen = IngestOptions(trigger_seconds=MIN_TRIGGER_SECONDS, progress_file=tmp_path / "p", **options).validated()
        parts = IngestParts(
            FakeSpark(), load_settings(), chosen, "query-1", threading.Event(), FakeSource(), FakeSink(), FakeLease()
        )
        return IngestQuery(parts)

    return make


def test_stop_interrupts_the_wait_before_a_retry(make_query, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_retry, "BASE_BACKOFF_SECONDS", 3600.0)
    monkeypatch.setattr(batch_retry, "MAX_BACKOFF_SECONDS", 3600.0)
    query = make_query(ShardReadError("shard shardId-000000000000: 8 failures"), batch_retries=3).start()
    assert query.source.failed.wait(60)
    query.stop(timeout=60)  # the first retry would wait an hour
    assert not query.is_active
    assert query.await_termination(timeout=0) is True, "stopped, not failed"
    assert query.source.reads == 1
    assert query.source.closed
    assert query.status["message"] == "Stopped"
    assert query.table_lease.steps == ["acquire", "renew", "release"], "held while running, freed when stopped"


def test_a_programming_error_stops_the_query_at_once(make_query) -> None:
    query = make_query(KeyError("shard_id"), batch_retries=3).start()
    with pytest.raises(IngestError, match="KeyError"):
        query.await_termination(timeout=60)
    assert query.source.reads == 1, "not retried"
    assert not query.is_active
    assert query.table_lease.steps[-1] == "release", "a failed query frees the table too"
