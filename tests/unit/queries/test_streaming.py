"""Notebook 10's truth: Spark's watermark rule in pandas, lateness by arrival, progress and checkpoint files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from icestream.config import load_settings
from icestream.errors import ConfigError
from icestream.queries import streaming

T0 = pd.Timestamp("2026-01-01 00:00", tz="UTC")


def minutes(*values: float) -> list[pd.Timestamp]:
    return [T0 + pd.Timedelta(minutes=value) for value in values]


def rows(batches: list[list[float]]) -> pd.DataFrame:
    """Rows of one event type, ``batches[n]`` the event minutes micro-batch ``n`` read."""
    frame = [(number, ts) for number, batch in enumerate(batches) for ts in minutes(*batch)]
    return pd.DataFrame(frame, columns=["batch", "event_ts"]).assign(event_type="click")


def test_the_rule_matches_what_spark_did_on_three_batches() -> None:
    # Measured with Spark 3.5.8 and Iceberg 1.10.2 (window 5 min, delay 5 min, one commit per batch):
    # batch 1 ran with watermark 00:04, batch 2 with 00:15 and dropped the rows of windows ending by 00:15.
    truth = streaming.watermark_truth(
        rows([[0, 9], [20, 12, 3], [14, 16, 9.9, 10.1]]), delay=pd.Timedelta(minutes=5), window=pd.Timedelta(minutes=5)
    )
    assert truth.watermarks.isna().iloc[0]
    assert list(truth.watermarks.iloc[1:]) == minutes(4, 15)
    assert truth.final_watermark == minutes(15)[0]  # the newest event, 00:20, minus 5 min
    assert sorted(truth.dropped["event_ts"]) == minutes(9.9, 10.1, 14)
    written = truth.windows.set_index("window_start")["events"]
    assert written.to_dict() == {minutes(0)[0]: 2, minutes(5)[0]: 1, minutes(10)[0]: 1}  # what Spark wrote
    assert truth.pending.set_index("window_start")["events"].to_dict() == {minutes(15)[0]: 1, minutes(20)[0]: 1}


def test_every_row_is_dropped_written_or_pending_and_one_batch_drops_nothing() -> None:
    batches = [[0, 30, 2, 50, 1, 44], [3, 61, 59, 5], [70, 10, 66]]
    truth = streaming.watermark_truth(rows(batches), delay=pd.Timedelta(minutes=2), window=pd.Timedelta(minutes=5))
    total = len(truth.dropped) + truth.windows["events"].sum() + truth.pending["events"].sum()
    assert total == sum(len(batch) for batch in batches)
    single = streaming.watermark_truth(
        rows([[value for batch in batches for value in batch]]),
        delay=pd.Timedelta(minutes=2),
        window=pd.Timedelta(minutes=5),
    )
    assert single.dropped.empty, "the watermark moves only between batches"


def test_late_means_after_a_newer_arrival_not_beside_it() -> None:
    arrival = pd.Series(pd.to_datetime(["2026-01-01 00:00:01"] * 2 + ["2026-01-01 00:00:02"] * 2))
    events = pd.Series(minutes(5, 1, 3, 6))  # 1 arrived beside 5 (same instant): not late; 3 came after 5: late
    assert streaming.late_in_arrival(arrival, events).tolist() == [False, False, True, False]


def test_windows_compared_counts_a_missing_side_as_zero() -> None:
    truth = streaming.watermark_truth(rows([[0, 1], [20]]), delay=pd.Timedelta(0), window=pd.Timedelta(minutes=5))
    written = pd.DataFrame({"window_start": [pd.Timestamp("2026-01-01 00:00")], "event_type": ["click"], "events": [2]})
    compared = streaming.windows_compared(written, truth)
    assert compared[["written", "rule"]].values.tolist() == [[2, 2]]
    assert streaming.windows_compared(written.iloc[0:0], truth)["written"].tolist() == [0]


def test_progress_table_reads_spark_s_progress() -> None:
    progress = [
        {"batchId": 0, "timestamp": "2026-01-01T00:00:00.000Z", "numInputRows": 9, "processedRowsPerSecond": 3.0,
         "durationMs": {"triggerExecution": 2500}, "eventTime": {"max": "2026-01-01T00:20:00.000Z",
         "watermark": "1970-01-01T00:00:00.000Z"},
         "stateOperators": [{"numRowsTotal": 5, "numRowsDroppedByWatermark": 0}]},
        {"batchId": 1, "timestamp": "2026-01-01T00:00:03.000Z", "numInputRows": 0,
         "eventTime": {"watermark": "2026-01-01T00:15:00.000Z"}, "stateOperators": []},
    ]  # fmt: skip
    frame = streaming.progress_table(progress, query="windows")
    assert frame["batch_id"].tolist() == [0, 1]
    assert frame["input_rows"].tolist() == [9, 0]
    assert pd.isna(frame["watermark"].iloc[0]), "Spark's epoch zero is no watermark yet"
    assert frame["watermark"].iloc[1] == minutes(15)[0]
    assert frame["duration_s"].iloc[0] == 2.5
    assert frame["dropped_by_watermark"].iloc[0] == 0
    assert pd.isna(frame["dropped_by_watermark"].iloc[1])
    assert set(frame["query"]) == {"windows"}


def test_checkpoint_files_pair_offsets_and_commits(tmp_path: Path) -> None:
    for log, batches in (("offsets", (0, 1)), ("commits", (0,))):
        (tmp_path / log).mkdir()
        for batch in batches:
            (tmp_path / log / str(batch)).write_text("v1")
            (tmp_path / log / f".{batch}.crc").write_text("")
    frame = streaming.checkpoint_files(tmp_path)
    assert frame.to_dict("records") == [
        {"batch_id": 0, "offsets": True, "commits": True},
        {"batch_id": 1, "offsets": True, "commits": False},
    ]
    assert streaming.checkpoint_files(tmp_path / "none").empty


def test_names_are_companions_and_the_backfill_must_exist(tmp_path: Path) -> None:
    settings = load_settings(table="clicks", namespace="ns", run_dir=str(tmp_path))
    names = streaming.streaming_names(settings)
    assert names.arrivals == "lake.ns.clicks_arrivals"
    assert names.checkpoints == tmp_path / streaming.CHECKPOINTS
    with pytest.raises(ConfigError, match=r"run 01_produce_events\.ipynb"):
        streaming.backfill_run(settings)
    summary = {"mode": "backfill", "stream": "s", "finished_at": 0.0, "run_id": "run-1",
               "generator": {"counts": {"late": 7}}, "producer": {"records": 1, "sent": 1, "retried": 3}}  # fmt: skip
    (tmp_path / "produce_backfill_summary.json").write_text(json.dumps(summary))
    run_id, counts = streaming.backfill_run(settings)
    assert (run_id, counts["late"], counts["retried"]) == ("run-1", 7, 3)
