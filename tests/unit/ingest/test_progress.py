"""Typed batch progress and the dict it is reported as (keys that notebooks, report and CLI read)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from icestream.ingest.progress import BatchProgress, IndexStats, PhaseSeconds, ProgressLog
from icestream.ingest.reading.read_stats import ReadStats

STARTED = datetime(2026, 11, 21, 5, 0, tzinfo=UTC)


def two_shards() -> BatchProgress:
    first = ReadStats(
        "shardId-000000000000",
        read=10,
        good=8,
        rejected=2,
        replayed_events=1,
        deduplicated=1,
        reasons={"malformed_json": 2},
        last_sequence="1009",
        millis_behind=0,
        first_arrival=100.0,
        last_arrival=104.0,
        calls=2,
        throttled=1,
        retried=1,
        behind_before_ms=4000,
        event_times_cut=3,
    )
    second = ReadStats(
        "shardId-000000000001",
        read=5,
        good=5,
        replayed_rejects=0,
        last_sequence="2004",
        millis_behind=1500,
        first_arrival=99.0,
        last_arrival=103.0,
        calls=1,
        behind_before_ms=9000,
        event_times_cut=1,
    )
    return BatchProgress(
        "q-1", 3, STARTED, shards=[first, second], dropped=Counter({"shardId-000000000001": 2}), written=8,
        rejected=2, events_snapshot_id=11, rejects_snapshot_id=10, ingest_ts=STARTED,
        durations=PhaseSeconds(plan=0.01, read=0.5, total=1.25), dedupe_index=IndexStats(40, 1, 30),
    )  # fmt: skip


def test_read_stats_travel_as_json() -> None:
    stats = two_shards().shards[0]
    assert ReadStats.from_json(stats.to_json()) == stats


def test_the_reported_dict_keeps_its_keys_and_totals() -> None:
    reported = two_shards().as_dict()
    assert list(reported) == [
        "id",
        "batch_id",
        "timestamp",
        "num_input_rows",
        "written",
        "rejected",
        "deduplicated",
        "replayed",
        "event_times_cut",
        "transform_dropped",
        "schema_changes",
        "duration_ms",
        "millis_behind_latest",
        "millis_behind_before_read",
        "caught_up",
        "events_snapshot_id",
        "rejects_snapshot_id",
        "metrics_snapshot_id",
        "reject_reasons",
        "first_arrival",
        "last_arrival",
        "shards",
        "dedupe_index",
        "prefetched",
        "read_on",
        "ingest_ts",
        "input_rows_per_second",
        "processed_rows_per_second",
        "driver_heap_mib",
    ]
    assert reported["num_input_rows"] == 15
    assert reported["deduplicated"] == 3, "one in a read task, two on the driver"
    assert reported["replayed"] == 1
    assert reported["event_times_cut"] == 4, "summed over the shards"
    assert reported["duration_ms"] == {
        "plan": 10.0, "read": 500.0, "parse": 0.0, "dedupe": 0.0, "evolve": 0.0, "write_rejects": 0.0,
        "write_events": 0.0, "metrics": 0.0, "total": 1250.0,
    }  # fmt: skip
    assert reported["millis_behind_latest"] == 1500
    assert reported["millis_behind_before_read"] == 9000, "the largest over the shards"
    assert reported["caught_up"] is False
    assert (reported["first_arrival"], reported["last_arrival"]) == (99.0, 104.0)
    assert reported["reject_reasons"] == {"malformed_json": 2}
    assert reported["dedupe_index"] == {"ids": 40, "loads": 1, "loaded_rows": 30}
    assert reported["shards"]["shardId-000000000001"]["deduplicated"] == 2
    assert reported["shards"]["shardId-000000000000"] == {
        "read": 10, "good": 8, "rejected": 2, "deduplicated": 1, "replayed": 1, "last_sequence": "1009",
        "finished": False, "millis_behind_latest": 0, "millis_behind_before_read": 4000, "calls": 2, "throttled": 1,
        "retried": 1, "iterator_renewals": 0,
    }  # fmt: skip
    json.dumps(reported)  # the JSON-lines file takes it as it is


def test_caught_up_needs_every_shard_at_its_tip_no_cap_and_no_shard_ended() -> None:
    progress = two_shards()
    progress.shards[1].millis_behind = 0
    assert progress.caught_up
    progress.capped = True
    assert not progress.caught_up
    progress.capped = False
    progress.shards[0].finished = True  # its children are readable now: more data
    assert not progress.caught_up


def test_the_log_keeps_recent_batches_writes_lines_and_survives_a_failing_callback(tmp_path: Path) -> None:
    shown: list[dict[str, Any]] = []

    def show(progress: dict[str, Any]) -> None:
        shown.append(progress)
        raise RuntimeError("a display problem")

    log = ProgressLog(tmp_path / "run" / "progress.jsonl", show)
    log.record(two_shards())
    lines = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert lines == list(log.recent) == shown
    assert lines[0]["batch_id"] == 3


def test_the_input_rate_is_measured_from_trigger_to_trigger() -> None:
    """15 rows that arrived over the 5 s between two triggers are 3 rows/s, however long the batch took."""
    progress = two_shards()  # 15 rows read
    progress.set_rates(began=105.0, ended=107.5, previous_began=100.0)
    assert progress.input_rows_per_second == 3.0  # not 15 / 7.5 (previous start to this end)
    assert progress.processed_rows_per_second == 6.0  # 15 rows in 2.5 s of processing
    first = two_shards()
    first.set_rates(began=100.0, ended=102.5, previous_began=None)
    assert first.input_rows_per_second == first.processed_rows_per_second == 6.0
