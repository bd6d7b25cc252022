"""The dashboard's SQL in both dialects, and its assembly from an engine's result sets."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from icestream.queries.realtime import dashboard_from_parts, dashboard_sql
from icestream.timestamps import to_micros


def test_one_dashboard_query_in_two_dialects() -> None:
    spark_totals, spark_counts = dashboard_sql("lake.ns.t", "", "unix_micros")
    duck_totals, duck_counts = dashboard_sql("iceberg_scan($location)", "", "epoch_us")
    assert spark_totals.replace("unix_micros", "epoch_us").replace("lake.ns.t", "iceberg_scan($location)") == (
        duck_totals
    )
    assert "avg(unix_micros(ingest_ts) - unix_micros(arrival_ts)) / 1e6 AS avg_wait_in_stream_s" in spark_totals
    assert spark_counts.replace("lake.ns.t", "iceberg_scan($location)") == duck_counts


def test_dashboard_from_parts() -> None:
    oldest, newest = datetime(2026, 11, 21, 5, tzinfo=UTC), datetime(2026, 11, 21, 6, tzinfo=UTC)
    totals = pd.DataFrame(
        {"events": [6], "unique_users": [2], "unique_sessions": [3], "oldest_us": [to_micros(oldest)],
         "newest_us": [to_micros(newest)], "avg_wait_in_stream_s": [1.5]}
    )  # fmt: skip
    counts = pd.DataFrame(
        {"event_type": ["click", "click", "view", None], "device_type": ["web", "ios", "web", "web"],
         "events": [2, 1, 2, 1]}
    )  # fmt: skip
    dashboard = dashboard_from_parts(totals, counts)
    assert dashboard.totals.iloc[0]["oldest_event"] == oldest
    assert dashboard.totals.iloc[0]["newest_event"] == newest
    assert dashboard.by_type.to_dict("list") == {"event_type": ["click", "view", "(none)"], "events": [3, 2, 1]}
    assert dashboard.by_device["device_type"].tolist() == ["web", "ios"]
    assert dashboard.by_device["share"].tolist() == [5 / 6, 1 / 6]


def test_run_filter_binds_each_run_id() -> None:
    from icestream.queries.realtime import run_filter

    assert run_filter(None) == ("", {})
    condition, args = run_filter(["run-a", "run-b'; DROP TABLE x"])
    assert condition == " AND properties['run_id'] IN (:run_0, :run_1)"
    assert args == {"run_0": "run-a", "run_1": "run-b'; DROP TABLE x"}  # values are bound, never text
    assert run_filter([]) == (" AND false", {})


def test_dashboard_carries_the_statements_it_came_from() -> None:
    from icestream.lake.statement import Statement

    totals = pd.DataFrame(
        {"events": [1], "unique_users": [1], "unique_sessions": [1], "oldest_us": [0], "newest_us": [0],
         "avg_wait_in_stream_s": [None]}
    )  # fmt: skip
    counts = pd.DataFrame({"event_type": ["click"], "device_type": ["web"], "events": [1]})
    ran = (Statement("SELECT 1"), Statement("SELECT 2"))
    assert dashboard_from_parts(totals, counts, ran).statements == ran
    assert dashboard_from_parts(totals, counts).statements == ()


def test_readable_nulls_shows_every_kind_of_null_as_none_and_keeps_the_frame() -> None:
    import pandas as pd

    from icestream.queries.realtime import readable_nulls

    frame = pd.DataFrame(
        {
            "batch_id": pd.array([1, None], dtype="Int64"),
            "watermark": pd.to_datetime([None, "2026-12-02 14:00:09"], utc=True),
            "rate": [None, 2.5],
            "rows": [3, 4],
        }
    )
    shown = readable_nulls(frame)
    assert shown["batch_id"].tolist() == [1, None]
    assert shown["watermark"].tolist() == [None, pd.Timestamp("2026-12-02 14:00:09", tz="UTC")]
    assert shown["rate"].tolist() == [None, 2.5]
    assert shown["rows"].dtype == "int64", "a column without nulls keeps its type"
    html = shown.to_html()
    assert not [null for null in ("NaT", "&lt;NA&gt;", "NaN") if null in html], html
    assert frame["batch_id"].isna().iloc[1], "the frame itself is kept"
    assert str(frame["batch_id"].dtype) == "Int64", "the frame itself is kept"
