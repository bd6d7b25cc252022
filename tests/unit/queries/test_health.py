"""The health report judges numbers against limits; no table needed."""

from __future__ import annotations

from icestream.queries.health import HealthThresholds, TableStats, health_report

MIB = 2**20


def stats(**changes: float) -> TableStats:
    values = {
        "records": 1000, "data_files": 4, "delete_files": 0, "data_bytes": 8 * MIB, "partitions": 4,
        "max_files_per_partition": 1, "small_files": 0, "average_file_bytes": 2 * MIB,
        "achievable_average_bytes": 2 * MIB, "target_file_bytes": 128 * MIB, "snapshots": 3, "manifests": 2,
        "metadata_bytes": MIB, "previous_metadata_bytes": 0,
    }  # fmt: skip
    return TableStats(**(values | changes))


def test_a_compacted_table_is_ok_everywhere() -> None:
    report = health_report(stats())
    assert report["status"].eq("OK").all(), report
    assert list(report.columns) == ["check", "value", "limit", "status", "detail"]


def test_each_limit_warns_on_its_own_number() -> None:
    streamed = stats(data_files=400, small_files=396, max_files_per_partition=100, average_file_bytes=20_000,
                     snapshots=500, metadata_bytes=16 * MIB, delete_files=50)  # fmt: skip
    report = health_report(streamed, HealthThresholds()).set_index("check")
    assert report["status"].eq("WARN").all(), report
    assert report.loc["snapshots", "limit"] == "≤ 100"
    assert report.loc["average file size / achievable", "limit"] == "≥ 0.5"
    assert (
        health_report(streamed, HealthThresholds(max_snapshots=1000)).set_index("check").loc["snapshots", "status"]
        == "OK"
    )


def test_sizes_are_shown_in_mib() -> None:
    row = stats().table()
    assert row["data_MiB"] == 8.0
    assert row["target_file_MiB"] == 128.0
    assert "data_bytes" not in row


def test_metadata_sizes_that_could_not_be_listed_are_unknown_not_ok() -> None:
    reason = "cannot list s3://bucket/t/metadata: No FileSystem for scheme s3"
    report = health_report(stats(metadata_bytes=0, metadata_unavailable=reason)).set_index("check")
    row = report.loc["metadata bytes / data bytes"]
    assert row["status"] == "UNKNOWN"
    assert row["detail"].startswith(f"unavailable: {reason}; known part:")
    assert (report.drop(index="metadata bytes / data bytes")["status"] == "OK").all()
    assert "metadata_unavailable" not in stats(metadata_unavailable=reason).table()


def test_counts_in_the_report_stay_integers_beside_ratios() -> None:
    report = health_report(stats(max_files_per_partition=7)).set_index("check")
    assert repr(report.loc["files in the fullest partition", "value"]) == "7"
    assert repr(report.loc["snapshots", "value"]) == "3"
    assert isinstance(report.loc["small-file ratio", "value"], float)


def test_a_filter_reads_only_the_files_whose_bounds_hold_its_value() -> None:
    import pandas as pd

    from icestream.queries.file_skipping import files_overlapping, files_read_per_value

    bounds = pd.DataFrame(
        {
            "record_count": [10, 20, 30, 5],
            "lower_bound": ["add_to_cart", "click", "page_view", None],
            "upper_bound": ["click", "login", "search", None],
        }
    )
    read = files_read_per_value(bounds, ["click", "purchase", "share"])
    # click is in the first two files' ranges, purchase in the third's; the file without bounds is always read.
    assert read["files read"].to_dict() == {"click": 3, "purchase": 2, "share": 1}
    assert read.loc["click", "records read"] == 35
    assert read.loc["click", "of files"] == 4
    assert files_overlapping(bounds, "d", "m").tolist() == [False, True, False, True]


def test_batch_freshness_shows_a_commit_without_a_batch_as_nulls_not_nan() -> None:
    import pandas as pd

    from icestream.queries.report import batch_freshness

    class Rows:
        def toPandas(self) -> pd.DataFrame:  # noqa: N802 - Spark's name
            return pd.DataFrame(
                {"snapshot_id": [1, 2], "committed_at": pd.to_datetime(["2026-11-25 10:00", "2026-11-25 10:01"]),
                 "batch_id": [7.0, float("nan")], "added_records": [5.0, float("nan")],
                 "freshness_oldest_s": [2.5, float("nan")], "freshness_newest_s": [1.0, float("nan")]}
            )  # fmt: skip

    class Table:
        name = "lake.ns.events"

        def run(self, _statement: object) -> Rows:
            return Rows()

    frame = batch_freshness(Table())
    assert "NaN" not in frame.round({"freshness_oldest_s": 2}).to_string()
    assert frame["freshness_oldest_s"].isna().tolist() == [False, True]
    assert frame.loc[0, "batch_id"] == 7
