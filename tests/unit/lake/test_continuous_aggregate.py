"""real_time_metrics' statements and reports, checked without Spark (lake.metrics_table)."""

from __future__ import annotations

from icestream.lake.continuous_aggregate import (
    ANSWER_COLUMNS,
    GROUP_COLUMNS,
    Refresh,
    fold_statement,
    full_query,
    groups_query,
)


def test_the_merge_adds_counts_and_unites_users_on_a_null_safe_group() -> None:
    sql = fold_statement("lake.db.clicks_metrics", "grouped").sql
    assert "MERGE INTO lake.db.clicks_metrics t\nUSING grouped s" in sql
    # A group without an event type or device is a group too: = would never match its null.
    assert "t.event_type <=> s.event_type AND t.device_type <=> s.device_type" in sql
    assert "t.events = t.events + s.events" in sql
    assert "t.unique_users = size(array_sort(array_union(t.users, s.users)))" in sql
    # The average is recomputed from the sums: a mean of means would weigh groups wrongly.
    assert "t.avg_duration_ms = IF(t.duration_count + s.duration_count > 0" in sql
    assert "WHEN NOT MATCHED THEN INSERT" in sql


def test_the_full_query_and_the_groups_answer_the_same_columns() -> None:
    full = full_query("lake.db.clicks")
    for column in ANSWER_COLUMNS:
        assert f"AS {column}" in full or column in GROUP_COLUMNS[1:2]
    assert "count(DISTINCT user_id) AS unique_users" in full
    assert "avg(TRY_CAST(properties['duration_ms'] AS DOUBLE))" in full
    groups = groups_query("fresh")
    assert "array_sort(collect_set(user_id)) AS users" in groups
    assert "count(duration) AS duration_count" in groups
    assert "TRY_CAST(properties['duration_ms'] AS DOUBLE)" in groups, "the same cast as the full query"


def test_a_refresh_describes_itself_in_one_line() -> None:
    assert Refresh("current", 7, 7, 0, 0, None, 0.01).describe() == "metrics current with events snapshot 7"
    fold = Refresh("fold", 7, 9, 1200, 30, 11, 0.5).describe()
    assert fold == "metrics folded: 1,200 events into 30 groups, events snapshot 7 → 9, in 0.50 s"
    rebuilt = Refresh("rebuild", 7, 9, 10, 2, 12, 1.0, "events snapshot 8 is a delete").describe()
    assert rebuilt.startswith("metrics rebuilt (events snapshot 8 is a delete): 10 events")
    first = Refresh("rebuild", None, 9, 10, 2, 12, 1.0, "first build").describe()
    assert first == "metrics rebuilt (first build): 10 events into 2 groups, events snapshot 9, in 1.00 s"
