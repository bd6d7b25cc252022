"""Routing without Spark: parsing the route, the mapping, unknown values, table names and positions."""

from __future__ import annotations

import numpy as np
import pytest

from icestream.config import DEMO_TABLE_SUFFIXES, load_settings
from icestream.errors import ConfigError
from icestream.ingest import dedupe
from icestream.ingest import positions as pos
from icestream.ingest.options import ingest_options
from icestream.ingest.reading.read_stats import ReadStats
from icestream.ingest.routing import (
    COMPANION_LIKE,
    EVENTS_KEY,
    OWNER_PROPERTY,
    RESERVED_SUFFIXES,
    Routing,
    declared_table,
    owner_properties,
    refusal,
    routing_from_settings,
)
from icestream.ingest.transform import done_ids
from icestream.lake.ddl import routed_table_comment

SETTINGS = load_settings(catalog="lake", namespace="ns", table="clicks")


def route_by_kind(frame):
    """A route function for the tests (never called here)."""
    return frame["event_type"]


def test_a_field_route_names_tables_after_its_values() -> None:
    routing = Routing.parse("event_type")
    assert routing.field_path == ("event_type",)
    assert routing.function is None
    assert routing.table_name(SETTINGS, "order") == "lake.ns.clicks_order"
    assert routing.table_name(SETTINGS, EVENTS_KEY) == "lake.ns.clicks"
    assert routing.declared(SETTINGS) == ["lake.ns.clicks"]


def test_a_map_key_is_a_field_path() -> None:
    assert Routing.parse("properties.kind").field_path == ("properties", "kind")


def test_a_function_route_is_imported() -> None:
    routing = Routing.parse(f"{__name__}:route_by_kind")
    assert routing.function is route_by_kind


def test_a_mapping_a_default_and_unknown_handling() -> None:
    routing = Routing.parse("event_type", ["order=orders", " click = clicks "], default="other", unknown="reject")
    assert dict(routing.tables) == {"order": "orders", "click": "clicks"}
    assert routing.default == "other"
    assert routing.unknown == "reject"
    assert routing.declared(SETTINGS) == [
        "lake.ns.clicks", "lake.ns.clicks_clicks", "lake.ns.clicks_orders", "lake.ns.clicks_other",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "tables", "default", "unknown", "message"),
    [
        ("", (), None, "default", "give a field"),
        ("event-type", (), None, "default", "name a field"),
        ("event_type; DROP TABLE x", (), None, "default", "name a field"),
        ("nosuchmodule_xyz:route", (), None, "default", "cannot import"),
        (f"{__name__}:missing", (), None, "default", "has no function"),
        ("event_type", ["order"], None, "default", "value=suffix"),
        ("event_type", ["order=orders", "order=others"], None, "default", "mapped twice"),
        ("event_type", ["order=bad-name"], None, "default", "not a valid identifier"),
        ("event_type", ["order=rejects"], None, "default", "keeps for itself"),
        ("event_type", ["order=orders_rejects"], None, "default", "collide with a companion"),
        ("event_type", ["order=orders_metrics"], None, "default", "collide with a companion"),
        ("event_type", (), "x_time_travel", "default", "collide with a companion"),
        ("event_type", (), "raw", "default", "keeps for itself"),
        # The demos' tables (issue 58): each demo drops and makes its tables again on every run.
        ("event_type", ["order=metrics_demo"], None, "default", "keeps for itself"),
        ("event_type", ["order=crash_demo_rejects"], None, "default", "keeps for itself"),
        ("event_type", ["order=change_demo"], None, "default", "keeps for itself"),
        ("event_type", ["order=routing_orders"], None, "default", "keeps for itself"),
        ("event_type", (), "routing", "default", "keeps for itself"),
        ("event_type", (), None, "drop", "choose default or reject"),
    ],
)
def test_bad_routes_fail_with_one_clear_error(spec, tables, default, unknown, message) -> None:
    with pytest.raises(ConfigError, match=message):
        Routing.parse(spec, tables, default, unknown)


def test_routing_comes_from_the_settings_and_options_override_them() -> None:
    assert routing_from_settings(SETTINGS) is None
    settings = load_settings(table="clicks", route="event_type", route_tables="order=orders", route_unknown="reject")
    assert settings.route_tables == ("order=orders",)
    routing = routing_from_settings(settings)
    assert routing is not None
    assert dict(routing.tables) == {"order": "orders"}
    assert routing.unknown == "reject"
    overridden = ingest_options(settings, routing={"route_unknown": "default", "route_tables": "a=b,c=d"}).routing
    assert overridden is not None
    assert dict(overridden.tables) == {"a": "b", "c": "d"}
    assert overridden.unknown == "default"
    assert ingest_options(SETTINGS, routing="event_type").routing == Routing.parse("event_type")
    assert ingest_options(SETTINGS).routing is None
    with pytest.raises(ConfigError, match="need a route"):
        routing_from_settings(SETTINGS, route_tables="order=orders")


def test_the_command_line_gives_the_routing_options() -> None:
    import argparse

    from icestream.cli.ingest_command import add_ingest_options, ingest_options_from

    parser = argparse.ArgumentParser()
    add_ingest_options(parser)
    args = parser.parse_args(["--route", "event_type", "--route-map", "order=orders", "--route-unknown", "reject"])
    routing = ingest_options_from(args)["routing"]
    assert routing == {"route": "event_type", "route_tables": "order=orders", "route_unknown": "reject"}
    assert ingest_options(SETTINGS, routing=routing).routing == Routing.parse("event_type", ["order=orders"],
                                                                             unknown="reject")  # fmt: skip
    with pytest.raises(SystemExit):
        parser.parse_args(["--route-unknown", "drop"])


def test_companion_suffixes_are_read_back_from_table_names() -> None:
    assert SETTINGS.companion_suffix("clicks_orders") == "orders"
    assert SETTINGS.companion_suffix("clicks") is None
    assert SETTINGS.companion_suffix("clicks_") is None
    assert SETTINGS.companion_suffix("views_orders") is None


def test_reading_restarts_from_the_earliest_table_and_a_missing_shard_counts_as_nothing() -> None:
    first = {"a": pos.after("100"), "b": pos.after("300", 2), "c": pos.ended("50")}
    second = {"a": pos.after("200"), "b": pos.after("300", 1), "c": pos.ended("50")}
    third = {"a": pos.after("150"), "c": pos.ended("50"), "d": pos.TRIM_HORIZON}
    assert pos.earliest_of([first, second]) == {"a": pos.after("100"), "b": pos.after("300", 1), "c": pos.ended("50")}
    assert pos.earliest_of([first, second, third]) == {"a": pos.after("100"), "c": pos.ended("50")}
    assert pos.earliest_of([]) == {}
    assert pos.inside_aggregates([first, second, third]) == {"b": ("300",)}


def test_done_ids_are_the_user_records_a_mark_covers_inside_its_aggregate() -> None:
    stats = ReadStats("a", inside_ids=[["300", 0, "e0"], ["300", 1, "e1"], ["300", 2, "e2"], ["400", 0, "f0"]])
    assert done_ids({"a": "300:1"}, [stats]) == {"a": ["e0", "e1"]}
    assert done_ids({"a": "400:0"}, [stats]) == {"a": ["f0"]}
    assert done_ids({"a": "300"}, [stats]) == {}  # after a whole record: the sequence number decides
    assert done_ids({}, [stats]) == {}
    assert ReadStats.from_json(stats.to_json()).inside_ids == stats.inside_ids


def test_an_id_committed_in_any_routed_table_counts() -> None:
    def batch(ids: list[str]) -> dedupe.Batch:
        packer = dedupe.Packer()
        for event_id in ids:
            packer.add(event_id, pos_time, None)
        return dedupe.Batch.unpack({"shardId-000000000000": packer.pack()})

    from datetime import UTC, datetime

    pos_time = datetime(2026, 11, 25, tzinfo=UTC)
    index = dedupe.IndexSet("query", 3_600_000_000, ("lake.ns.clicks",))
    index.include("lake.ns.clicks_orders")
    index.include("lake.ns.clicks_orders")
    assert list(index.parts) == ["lake.ns.clicks", "lake.ns.clicks_orders"]
    for part in index.parts.values():
        part.snapshot_id, part.low = dedupe.NO_SNAPSHOT, 0  # as if loaded from empty tables
    committed = batch(["a", "b"])
    index.add(committed, np.arange(2, dtype=np.int64))
    index.parts["lake.ns.clicks_orders"].add(batch(["c"]), np.arange(1, dtype=np.int64))
    assert len(index) == 3
    probe = batch(["x", "b", "c"])
    start, end = index.window(probe)
    assert index.committed(probe, start, end).tolist() == [1, 2]
    index.reset()
    assert len(index) == 0


@pytest.mark.parametrize(
    ("value", "companion_like"),
    [
        ("rejects", True), ("orders_rejects", True), ("orders_metrics", True), ("x_raw", True),
        ("a_b_sort_demo", True), ("time_travel", True), ("metrics_demo", True), ("crash_demo", True),
        ("change_demo", True), ("routing", True), ("routing_orders", True), ("metrics_demo_metrics", True),
        ("orders", False), ("orders_demo", False), ("draw", False), ("rejects_orders", False), ("metricsx", False),
        ("raw_events", False),
    ],
)  # fmt: skip
def test_companion_like_values_are_the_reserved_suffixes_alone_or_after_an_underscore(value, companion_like) -> None:
    import re

    assert bool(re.search(COMPANION_LIKE, value)) is companion_like


def test_every_table_a_demo_makes_is_reserved_and_orders_is_left_to_users() -> None:
    # notebook 05 shows --route-map order=orders: <table>_orders is a user's name, no demo's.
    assert set(DEMO_TABLE_SUFFIXES) <= RESERVED_SUFFIXES
    assert "orders" not in RESERVED_SUFFIXES
    assert Routing.parse("event_type", ["order=orders"]).tables == {"order": "orders"}


STREAM = "clicks-stream"
MINE = owner_properties(load_settings(catalog="lake", namespace="ns", table="clicks", stream_name=STREAM))


@pytest.mark.parametrize(
    ("properties", "listed", "why"),
    [
        (None, False, None),  # no such table: the route makes it
        (MINE, False, None),  # made by this route: its properties say so
        # Made before routed tables recorded their owner: listed, fed by the stream, a routed table's comment.
        ({"icestream.source-stream": STREAM, "comment": routed_table_comment(STREAM)}, True, None),
        ({"icestream.source-stream": STREAM, "comment": routed_table_comment(STREAM)}, False, "not made by the route"),
        # Issue 43: another pipeline's rejects table, or one the old ingest took over (fed by us, not made by us).
        ({"icestream.source-stream": "orders-stream", "comment": "Records from orders-stream"}, False,
         "fed by stream 'orders-stream'"),
        ({"icestream.source-stream": STREAM, "comment": "Records from orders-stream"}, True, "not made by the route"),
        ({}, False, "no stream feeds it"),  # set up by another pipeline that never ingested
        ({**MINE, OWNER_PROPERTY: "lake.ns.clicks_x"}, True, "routed from lake.ns.clicks_x"),
        ({**MINE, "icestream.source-stream": "other"}, True, "fed by stream 'other'"),
    ],
)  # fmt: skip
def test_a_route_writes_only_the_tables_it_made(properties, listed, why) -> None:
    settings = load_settings(catalog="lake", namespace="ns", table="clicks", stream_name=STREAM)
    found = refusal(properties, settings, STREAM, listed)
    if why is None:
        assert found is None
    else:
        assert found is not None
        assert why in found


def test_a_declared_table_the_route_does_not_own_stops_the_ingest() -> None:
    assert declared_table("lake.ns.clicks_orders", None) == "lake.ns.clicks_orders"
    with pytest.raises(ConfigError, match=r"lake\.ns\.clicks_orders is named by route_tables.*fed by stream 'x'"):
        declared_table("lake.ns.clicks_orders", "fed by stream 'x'")
