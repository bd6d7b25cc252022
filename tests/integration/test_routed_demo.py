"""Notebook 04's routed demo: two record kinds and a new field land in their tables as the truth says."""

from __future__ import annotations

from dataclasses import replace

from icestream.demos.routed_demo import routed_stream_demo
from icestream.synthetic.second_kind import NEW_FIELD


def test_the_routed_demo_matches_its_truth_per_table_and_runs_again(spark, fresh) -> None:
    settings = fresh(shards=1, prefix="rdemo")
    for _ in range(2):  # a second run reads as the first
        demo = routed_stream_demo(spark, settings, records=600, hours=0.25, order_rate=0.2)
        assert demo is not None
        compared = demo.compare(spark)
        assert list(compared["rows"]) == list(compared["rows expected"])
        assert compared["ids match"].all()
        assert (compared["rows"] > 0).all()
        assert list(compared[f"rows with {NEW_FIELD}"]) == list(compared[f"rows with {NEW_FIELD} expected"])
        added = [(batch, table) for batch, table, changes in demo.schema_changes if NEW_FIELD in changes]
        assert [table for _, table in added] == [demo.settings.table_name]
        assert added[0][0] > demo.progress[0]["batch_id"], "T falls after the first batch"


def test_the_demo_sends_nothing_outside_the_emulator() -> None:
    from icestream.config import load_settings

    aws = replace(load_settings(), profile="aws")
    assert routed_stream_demo(None, aws) is None  # type: ignore[arg-type]
