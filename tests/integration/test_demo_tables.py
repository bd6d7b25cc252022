"""Issue 58: a demo drops only tables it made itself; a user's table of a demo's name survives, with one clear error."""

from __future__ import annotations

import pytest

from icestream.config import DEMO_TABLE_SUFFIXES
from icestream.demos.change_demo import demo_settings as change_demo_settings
from icestream.demos.crash import DEMO_SUFFIX as CRASH_DEMO
from icestream.demos.crash import crash_demo_settings
from icestream.demos.layout_demo import create_layout_demo
from icestream.demos.routed_demo import start_afresh
from icestream.errors import TableOwnershipError
from icestream.ingest.routing import RESERVED_SUFFIXES
from icestream.lake.demo_tables import DEMO_PROPERTY, demo_mark, drop_demo_tables, table_demo
from icestream.lake.table import setup_tables


def _users_table(spark, name: str) -> None:
    spark.sql(f"CREATE TABLE {name} (order_id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {name} VALUES (1), (2), (3)")


def test_a_users_routed_orders_table_is_not_the_change_demos(spark, fresh) -> None:
    """The reproduction: ``--route-map order=orders`` made ``<table>_orders``, and notebook 06's demo purged it."""
    settings = fresh(shards=1, prefix="owner")
    users = settings.companion_table_name("orders")
    _users_table(spark, users)
    demo = change_demo_settings(settings)
    assert demo.table_name != users, "the change demo's table is no longer <table>_orders"
    start_afresh(spark, demo, "change_demo")
    assert spark.table(users).count() == 3


@pytest.mark.parametrize("kind", ["events", "rejects"])
def test_a_table_of_the_demos_name_it_did_not_make_survives_with_a_clear_error(spark, fresh, kind) -> None:
    settings = fresh(shards=1, prefix="owner")
    demo = change_demo_settings(settings)
    users = demo.table_name if kind == "events" else demo.rejects_table_name
    _users_table(spark, users)
    with pytest.raises(TableOwnershipError) as raised:
        start_afresh(spark, demo, "change_demo")
    message = str(raised.value)
    assert len(message.splitlines()) == 1
    assert users in message
    assert "-p table" in message, "it says which parameter gives the demo other names"
    assert spark.table(users).count() == 3


def test_a_collision_drops_none_of_the_demos_tables(spark, fresh) -> None:
    """Every table is checked before any is dropped: the demo's own table stays with the user's beside it."""
    settings = fresh(shards=1, prefix="owner")
    demo = crash_demo_settings(settings)
    setup_tables(spark, demo, demo_mark(CRASH_DEMO))
    spark.sql(f"DROP TABLE {demo.rejects_table_name} PURGE")
    _users_table(spark, demo.rejects_table_name)
    with pytest.raises(TableOwnershipError, match="crash_demo_rejects"):
        drop_demo_tables(spark, (demo.table_name, demo.rejects_table_name), CRASH_DEMO)
    assert spark.catalog.tableExists(demo.table_name)
    assert spark.table(demo.rejects_table_name).count() == 3


def test_a_demo_marks_what_it_makes_and_drops_it_on_the_next_run(spark, fresh) -> None:
    settings = fresh(shards=1, prefix="owner")
    demo = crash_demo_settings(settings)
    start_afresh(spark, demo, CRASH_DEMO)
    setup_tables(spark, demo, demo_mark(CRASH_DEMO))
    assert [table_demo(spark, name) for name in (demo.table_name, demo.rejects_table_name)] == [CRASH_DEMO] * 2
    start_afresh(spark, demo, CRASH_DEMO)  # its own tables: dropped without a word
    assert not spark.catalog.tableExists(demo.rejects_table_name)


def test_another_demos_mark_is_not_this_demos(spark, fresh) -> None:
    settings = fresh(shards=1, prefix="owner")
    demo = change_demo_settings(settings)
    marked = f"TBLPROPERTIES ('{DEMO_PROPERTY}' = 'metrics_demo')"
    spark.sql(f"CREATE TABLE {demo.table_name} (x INT) USING iceberg {marked}")
    with pytest.raises(TableOwnershipError):
        drop_demo_tables(spark, (demo.table_name,), "change_demo")
    assert spark.catalog.tableExists(demo.table_name)


def test_the_layout_demo_leaves_a_users_table_and_remakes_its_own(spark, fresh) -> None:
    settings = fresh(shards=1, prefix="owner")
    made = create_layout_demo(spark, settings)
    assert table_demo(spark, made.name) == "layout_demo"
    assert create_layout_demo(spark, settings).name == made.name, "a second run drops and makes its own again"
    spark.sql(f"DROP TABLE {made.name} PURGE")
    _users_table(spark, made.name)
    with pytest.raises(TableOwnershipError, match="layout_demo"):
        create_layout_demo(spark, settings)
    assert spark.table(made.name).count() == 3


def test_every_demo_table_name_is_reserved_for_routing() -> None:
    assert set(DEMO_TABLE_SUFFIXES) <= RESERVED_SUFFIXES


def test_the_change_and_metrics_demos_run_twice_on_their_own_marked_tables(spark, fresh) -> None:
    from icestream.demos.change_demo import change_stream_demo
    from icestream.demos.metrics_demo import metrics_stream_demo

    settings = fresh(shards=1, prefix="owner")
    users = settings.companion_table_name("orders")
    _users_table(spark, users)  # a user's routed table beside the demos
    for _ in range(2):  # the second run drops what the first made
        changed = change_stream_demo(spark, settings, orders=20, changes=100)
        grown = metrics_stream_demo(spark, settings, records=200, parts=2)
        assert changed is not None
        assert grown is not None
    made = (changed.settings.table_name, changed.settings.rejects_table_name, grown.settings.table_name,
            grown.settings.metrics_table_name, grown.settings.rejects_table_name)  # fmt: skip
    assert [table_demo(spark, name) for name in made] == ["change_demo"] * 2 + ["metrics_demo"] * 3
    assert changed.compare(spark).loc["orders that differ"].iloc[0] == 0
    assert spark.table(users).count() == 3
