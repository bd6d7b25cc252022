"""The layout walk (catalog → metadata file → manifest list → manifests → data files) on 00's demo table."""

from __future__ import annotations

import dataclasses

import pytest

from icestream.demos.layout_demo import create_layout_demo
from icestream.lake.layout import LEVELS


@pytest.fixture(scope="module")
def demo(spark, settings):
    local = dataclasses.replace(settings, table="layout_test")
    table = create_layout_demo(spark, local)
    yield table
    spark.sql(f"DROP TABLE IF EXISTS {table.name} PURGE")


def test_the_walk_finds_the_files_the_metadata_tables_list(demo) -> None:
    layout = demo.layout("jdbc")
    nodes = layout.nodes
    metadata_file, snapshot_id = demo.inspect.metadata_location()
    assert layout.snapshot_id == snapshot_id == demo.inspect.current_snapshot_id()
    assert layout.snapshots == 2  # two INSERTs, one snapshot each
    assert nodes.loc[nodes["level"] == "metadata file", "path"].tolist() == [metadata_file]
    manifest_list = demo.spark.sql(
        f"SELECT manifest_list FROM {demo.name}.snapshots WHERE snapshot_id = {snapshot_id}"
    ).first()[0]
    assert nodes.loc[nodes["level"] == "manifest list", "path"].tolist() == [manifest_list]
    manifests = nodes[nodes["level"] == "manifest"]
    assert sorted(manifests["path"]) == sorted(demo.inspect.manifests()["path"])
    assert len(manifests) == 2  # the second commit added a manifest beside the first
    data_files = nodes[nodes["level"] == "data file"]
    files = demo.inspect.files()
    assert sorted(data_files["path"]) == sorted(files["file_path"])
    assert len(data_files) == 3  # the first commit spans two hour partitions, the second one
    assert data_files["records"].sum() == files["record_count"].sum() == 4
    assert set(data_files["parent"]) == set(manifests["name"]), "every data file hangs under a manifest"
    levels = layout.levels()
    assert levels["level"].tolist() == list(LEVELS)
    assert levels.set_index("level")["files"].to_dict() == {
        "catalog": 1, "metadata file": 1, "manifest list": 1, "manifest": 2, "data file": 3,
    }  # fmt: skip


def test_the_demo_is_recreated_not_appended_to(spark, settings, demo) -> None:
    local = dataclasses.replace(settings, table="layout_test")
    again = create_layout_demo(spark, local)
    assert again.name == demo.name
    assert spark.table(again.name).count() == 4
    assert [str(statement).split(" ", 1)[0] for statement in again.statements][-2:] == ["INSERT", "INSERT"]
