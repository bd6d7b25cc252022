"""The ingest's report without a JVM: progress as tables, the lag before the read, statements shown."""

from __future__ import annotations

import ast
from typing import Any

import pandas as pd

from icestream.config import load_settings
from icestream.lake.table import LakeTable
from icestream.queries.report import positions_statement, progress_frame, rejects_by_reason, shard_lag_frame, write_call


def batch(batch_id: int, timestamp: str, first_arrival: float, before: list[int | None]) -> dict[str, Any]:
    shards = {
        f"shardId-00000000000{index}": {"read": 10, "millis_behind_latest": 0, "millis_behind_before_read": behind}
        for index, behind in enumerate(before)
    }
    return {
        "batch_id": batch_id, "timestamp": timestamp, "num_input_rows": 10 * len(before), "written": 9,
        "rejected": 1, "deduplicated": 0, "replayed": 0, "input_rows_per_second": 5.0,
        "processed_rows_per_second": 50.0, "millis_behind_latest": 0,
        "millis_behind_before_read": max((b for b in before if b is not None), default=None),
        "first_arrival": first_arrival, "duration_ms": {"read": 500.0, "total": 900.0}, "shards": shards,
    }  # fmt: skip


START = pd.Timestamp("2026-11-25T10:00:00Z").timestamp()
PROGRESS = [
    batch(14, "2026-11-25T10:00:00+00:00", START - 90, [90_000, 85_000]),  # what waited before the run
    batch(15, "2026-11-25T10:00:02+00:00", START + 1, [2_000, None]),
]


def test_the_backlog_batch_is_told_apart_and_its_lag_shows_before_the_read() -> None:
    frame = progress_frame(PROGRESS)
    assert frame["backlog"].tolist() == [True, False]
    assert frame["behind_before_s"].tolist() == [90.0, 2.0]
    assert frame["behind_s"].tolist() == [0.0, 0.0], "after the read both were at the tip"
    assert frame["read"].dtype.kind == "i"


def test_shard_lag_keeps_a_missing_lag_as_a_null() -> None:
    lag = shard_lag_frame(PROGRESS)
    assert lag["shard"].tolist() == ["0", "1"] * 2, "shardId-000000000001 reads as shard 1"
    assert lag["behind_before_s"].iloc[:3].tolist() == [90.0, 85.0, 2.0]
    assert lag["behind_before_s"].isna().iloc[3]
    assert lag["behind_before_s"].dtype == "Float64"


class _Answer:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def first(self) -> Any:
        return self.rows[0] if self.rows else None

    def toPandas(self) -> pd.DataFrame:  # noqa: N802 - Spark's name
        return pd.DataFrame()


class _Session:
    def __init__(self, rows: list[Any]) -> None:
        self.rows, self.ran = rows, []

    def sql(self, sql: str, args: Any = None) -> _Answer:
        self.ran.append((sql, args))
        return _Answer(self.rows)


def test_the_write_call_is_rebuilt_from_the_snapshot_summary() -> None:
    summary = {
        "icestream.batch-id": "15",
        "icestream.first-arrival-ms": "1796244316429",
        "icestream.kinesis-created": "1796241899.703",
        "icestream.positions": '{"s-0":"AFTER:9"}',
        "added-records": "9",
    }
    table = LakeTable(_Session([(summary,)]), "lake.ns.events")  # type: ignore[arg-type]
    call = write_call(table, 42)
    assert table.last_statement is call
    assert call.writes
    assert table.statements[-2].args == {"snapshot_id": 42}
    # What the notebook prints is Python a learner can paste: it parses, and names the frame it writes.
    tree = ast.parse(str(call))
    assigned = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) for target in node.targets}
    written = {node.value.id for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "writeTo"}
    assert written, "a writeTo call"
    targets = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "writeTo"
    }
    assert targets == {"lake.ns.events"}, "it writes to the table the snapshot is of"
    assert str(call).rstrip(")").rstrip().endswith(".append()"), "an append, last"
    assert written <= assigned, "the DataFrame it writes is defined in the text"
    options = {
        node.args[0].value: node.args[1].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "option"
    }
    assert options == {
        f"snapshot-property.{key}": value for key, value in summary.items() if key.startswith("icestream.")
    }
    assert "2026-12-02 20:45:16.429 UTC" in str(call), "an epoch in milliseconds with its readable time"
    assert "2026-12-02 20:04:59.703 UTC" in str(call), "an epoch in seconds with its readable time"


def test_rejects_of_this_run_and_of_all_runs_in_one_recorded_statement() -> None:
    session = _Session([])
    table = LakeTable(session, "lake.ns.rejects")  # type: ignore[arg-type]
    since = pd.Timestamp("2026-11-25T10:00:00Z").to_pydatetime()
    rejects_by_reason(session, load_settings(profile="local"), since=since, table=table)  # type: ignore[arg-type]
    assert "count_if(ingest_ts >= :since) AS this_run" in table.last_statement.sql
    assert session.ran[-1][1] == {"since": since}


def test_the_position_read_names_the_stream_as_a_bound_value() -> None:
    statement = positions_statement(load_settings(profile="local", stream_name="s-1"), "lake.ns.events")
    assert "FROM lake.ns.events.snapshots" in statement.sql
    assert statement.args == {"stream": "s-1"}


def test_a_run_without_batches_has_the_columns_and_no_rows() -> None:
    progress = progress_frame([])  # an AvailableNow run on a stream with nothing new (a scheduled run)
    assert len(progress) == 0
    assert {"batch_id", "backlog", "read", "written", "rejected", "deduplicated", "replayed", "total_s"} <= set(
        progress.columns
    )
    assert progress.loc[~progress["backlog"], "batch_id"].tolist() == []
    assert int(progress[["read", "written"]].sum().sum()) == 0


def test_a_batch_that_only_read_again_what_a_table_held_is_a_replay_and_its_lag_is_left_out() -> None:
    replay = batch(16, "2026-11-25T10:00:04+00:00", START + 2, [29_000, 28_000])
    replay.update(num_input_rows=20, written=0, rejected=0, replayed=20)  # a restart from the rejects' older position
    frame = progress_frame([*PROGRESS, replay])
    assert frame["replay"].tolist() == [False, False, True]
    assert frame["backlog"].tolist() == [True, False, False]
    assert shard_lag_frame([*PROGRESS, replay])["batch_id"].tolist() == [14, 14, 15, 15]


def test_the_rate_panels_leave_a_replay_out() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from icestream.plots.report import plot_rates

    replay = batch(16, "2026-11-25T10:00:04+00:00", START + 2, [29_000, 28_000])
    replay.update(num_input_rows=20, written=0, rejected=0, replayed=20)
    fig = plot_rates(progress_frame([*PROGRESS, replay]))
    plotted = [set(line.get_xdata()) for ax in fig.axes for line in ax.get_lines()]
    plt.close(fig)
    assert set().union(*plotted) == {14, 15}


def test_a_batch_of_duplicates_only_commits_nothing_and_is_a_replay_but_one_of_rejects_is_not() -> None:
    duplicates = batch(17, "2026-11-25T10:00:06+00:00", START + 3, [19_500])
    duplicates.update(num_input_rows=1, written=0, rejected=0, deduplicated=1)
    rejects_only = batch(18, "2026-11-25T10:00:08+00:00", START + 4, [1_000])
    rejects_only.update(num_input_rows=1, written=0, rejected=1)
    assert progress_frame([duplicates, rejects_only])["replay"].tolist() == [True, False]
