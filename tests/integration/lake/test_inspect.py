"""LakeTable.inspect on a table of a few appends: metadata tables, the ancestry walk, recorded statements."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from icestream.lake.table import LakeTable
from icestream.synthetic.generator import backfill_config
from tests.conftest import generated_table


@pytest.fixture(scope="module")
def loaded(spark, settings):
    """Appends of 200 clean events (about 600 in all), and how many appends (snapshots) that made."""
    end = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    config = backfill_config(hours=1, count=600, end=end, seed=7, bad_rate=0.0, duplicate_rate=0.0)
    with generated_table(spark, "i", config, chunk_rows=200) as (_, name, _, counts):
        yield LakeTable(spark, name), -(-counts["written"] // 200)


def test_ancestry_walks_from_the_current_snapshot_back(loaded) -> None:
    table, appends = loaded
    walked = [int(snapshot.snapshotId()) for snapshot in table.inspect.ancestry()]
    assert len(walked) == appends >= 3
    assert walked[0] == table.inspect.current_snapshot_id()
    assert walked[::-1] == table.inspect.snapshots()["snapshot_id"].tolist()
    assert walked[::-1] == table.inspect.history()["snapshot_id"].tolist()


def test_snapshots_carry_the_columns_notebooks_and_plots_read(loaded) -> None:
    table, _ = loaded
    snaps = table.inspect.snapshots()
    assert list(snaps.columns) == [
        "committed_at", "snapshot_id", "parent_id", "operation", "added_records", "total_records",
        "added_data_files", "total_data_files", "batch_id",
    ]  # fmt: skip
    assert snaps["added_records"].cumsum().tolist() == snaps["total_records"].tolist()
    assert snaps["total_data_files"].iloc[-1] == len(table.inspect.data_files())
    assert snaps["batch_id"].isna().all()  # not written by the ingest
    assert snaps["parent_id"].iloc[1:].tolist() == snaps["snapshot_id"].iloc[:-1].tolist()  # exact 64-bit ids
    assert snaps["parent_id"].isna().tolist() == [True] + [False] * (len(snaps) - 1)


def test_metadata_log_ends_at_the_current_metadata_file(loaded) -> None:
    table, appends = loaded
    location, snapshot_id = table.inspect.metadata_location()
    log = table.inspect.metadata_log()
    assert log["file"].iloc[-1] == location
    assert log["latest_snapshot_id"].iloc[-1] == snapshot_id
    assert snapshot_id == table.inspect.current_snapshot_id()
    files = table.inspect.metadata_files()
    assert (files["kind"] == "manifest list").sum() == appends


def test_properties_and_metadata_columns(loaded) -> None:
    table, _ = loaded
    assert table.inspect.properties()["write.target-file-size-bytes"] == str(128 * 1024 * 1024)
    described = table.inspect.metadata_columns(("snapshots", "refs")).set_index("metadata table")["columns"]
    assert described["snapshots"].startswith("committed_at, snapshot_id, parent_id, operation")
    assert described["refs"].startswith("name, type, snapshot_id")


def test_every_query_is_recorded_with_its_arguments(loaded) -> None:
    table, _ = loaded
    table.inspect.refs()
    assert table.last_statement.sql == f"SELECT name, type, snapshot_id FROM {table.name}.refs ORDER BY type, name"
    table.inspect.current_snapshot_id("main")
    assert table.last_statement.args == {"branch": "main"}
    assert str(table.last_statement).endswith("-- bound: :branch = 'main'")


def test_a_folder_that_cannot_be_listed_raises_a_clear_error(spark) -> None:
    # The failure notebook 09 hits on an s3:// warehouse without an S3 Hadoop FileSystem (iceberg#11541).
    from icestream.errors import StorageListingError
    from icestream.lake.inspect import _list_sizes

    with pytest.raises(StorageListingError, match=r"cannot list s3://no-such-bucket/t/metadata: .*scheme"):
        _list_sizes(spark, "s3://no-such-bucket/t/metadata")


def test_unlisted_metadata_sizes_are_marked_unavailable_not_dropped(loaded, monkeypatch) -> None:
    from icestream.lake.inspect import Inspect
    from icestream.queries import health

    table, _ = loaded
    real_log = Inspect.metadata_log

    def log_on_s3(self):
        frame = real_log(self)
        frame["file"] = [path.replace("file:", "s3://bucket", 1) for path in frame["file"]]
        return frame

    monkeypatch.setattr(Inspect, "metadata_log", log_on_s3)
    files = table.inspect.metadata_files()
    unlisted = files[files["kind"].str.contains("metadata.json")]
    assert unlisted["bytes"].isna().all()
    assert unlisted["unavailable"].str.startswith("cannot list s3://bucket").all()
    assert files.loc[files["kind"] == "manifest", "unavailable"].isna().all()

    stats = health.collect_stats(table)
    assert stats.metadata_unavailable.startswith("cannot list s3://bucket")
    row = health.health_report(stats).set_index("check").loc["metadata bytes / data bytes"]
    assert row["status"] == "UNKNOWN"
    assert row["detail"].startswith("unavailable: cannot list s3://bucket")


def test_snapshot_ids_are_exact_integers_never_floats(loaded) -> None:
    """Ids are 64-bit: as float64 (what pandas makes of a column with a null) they print as 8.416206e+18
    and lose their last digits, so every frame notebooks 04 and 07 show keeps them as integers."""
    table, _ = loaded
    snaps = table.inspect.snapshots()
    history = table.inspect.history()
    frames = {
        "snapshots.snapshot_id": snaps["snapshot_id"],
        "snapshots.parent_id": snaps["parent_id"],
        "history.snapshot_id": history["snapshot_id"],
        "history.parent_id": history["parent_id"],
        "refs.snapshot_id": table.inspect.refs()["snapshot_id"],
        "metadata_log.latest_snapshot_id": table.inspect.metadata_log()["latest_snapshot_id"],
        "manifests.added_snapshot_id": table.inspect.manifests()["added_snapshot_id"],
    }
    for column, values in frames.items():
        assert values.dtype.kind in "iu" or str(values.dtype) == "Int64", f"{column} is {values.dtype}"
    assert snaps["parent_id"].isna().iloc[0], "the first snapshot has no parent: a null, kept as <NA>"
    assert str(snaps["parent_id"].dtype) == "Int64"
    assert snaps["parent_id"].iloc[1:].tolist() == snaps["snapshot_id"].iloc[:-1].tolist()
    assert "e+" not in snaps[["snapshot_id", "parent_id"]].to_string()
