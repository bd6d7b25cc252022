"""Routing: one stream's events into several tables, created on first sight, exactly once per table."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest

from icestream.cli import main
from icestream.config import Settings, load_settings
from icestream.errors import ConfigError, IngestError
from icestream.ingest.positions import SOURCE_PROPERTY, mark_source_stream
from icestream.ingest.routing import UNKNOWN_ROUTE, Routing, remember_routed_table, routed_tables
from icestream.kinesis.clients import ensure_stream
from icestream.lake.ddl import create_routed_table
from icestream.lake.table import LakeTable, setup_tables
from icestream.queries import duckdb_engine as duck
from tests.helpers.crash import SimulatedCrashError
from tests.helpers.ingest import drain
from tests.helpers.streams import event_payload, put, send_aggregated, user_records

MAPPED = {"route": "event_type", "route_tables": "order=orders,click=clicks", "route_unknown": "reject"}


def typed_records(count: int) -> tuple[list[tuple[bytes, str]], dict[str, set[str]]]:
    """Events of three types (click, order, and view, which the mapping does not know) and one malformed record."""
    sent, ids = [], {"click": set(), "order": set(), "view": set()}
    for number in range(count):
        user, kind = f"u{number % 5}", ("click", "order", "click", "view")[number % 4]
        event = json.loads(event_payload(number, user)) | {"event_type": kind}
        sent.append((json.dumps(event).encode(), user))
        ids[kind].add(f"ev-{number}")
    sent.append((b"not json", "u0"))
    return sent, ids


def ids_in(spark, table: str) -> Counter:
    spark.catalog.refreshTable(table)
    return Counter(row.event_id for row in spark.table(table).select("event_id").collect())


def rejects_by_reason(spark, settings: Settings) -> Counter:
    spark.catalog.refreshTable(settings.rejects_table_name)
    return Counter(row.reason for row in spark.table(settings.rejects_table_name).select("reason").collect())


def crash_at_table(count: int, batch: int | None = None):
    """A fault hook that crashes at the ``count``-th ``between_tables`` point (of batch ``batch``)."""
    seen = []

    def hook(phase: str, batch_id: object) -> None:
        if phase == "between_tables" and (batch is None or batch_id == batch):
            seen.append(phase)
            if len(seen) == count:
                raise SimulatedCrashError(f"crash between routed tables ({batch_id})")

    return hook


def test_two_event_types_go_to_two_tables_and_the_unknown_to_rejects(spark, fresh) -> None:
    settings = fresh(shards=2, prefix="rt")
    sent, ids = typed_records(48)
    put(settings, sent)
    query = drain(spark, settings, routing=MAPPED)

    clicks, orders = (settings.companion_table_name(suffix) for suffix in ("clicks", "orders"))
    assert ids_in(spark, clicks) == Counter(ids["click"])
    assert ids_in(spark, orders) == Counter(ids["order"])
    assert ids_in(spark, settings.table_name) == Counter()  # nothing falls to the events table
    assert rejects_by_reason(spark, settings) == Counter({UNKNOWN_ROUTE: len(ids["view"]), "invalid_json": 1})
    detail = spark.table(settings.rejects_table_name).where(f"reason = '{UNKNOWN_ROUTE}'").first().detail
    assert detail == "route event_type: no table for value view"
    assert sum(batch["written"] for batch in query.recent_progress) == len(ids["click"]) + len(ids["order"])
    # Order per partition key within each table: a user's events by sequence number are in id order.
    rows = spark.table(orders).select("user_id", "shard_id", "sequence_number", "event_id").collect()
    for user in {row.user_id for row in rows}:
        mine = sorted((r for r in rows if r.user_id == user), key=lambda r: (len(r.sequence_number), r.sequence_number))
        numbers = [int(r.event_id.removeprefix("ev-")) for r in mine]
        assert numbers == sorted(numbers)
    # A second engine reads the routed table Spark created and wrote.
    location, _ = LakeTable(spark, orders).inspect.metadata_location()
    connection = duck.connect()
    try:
        scanned = connection.execute(f"SELECT event_id FROM iceberg_scan('{location}')").fetchall()
    finally:
        connection.close()
    assert Counter(row[0] for row in scanned) == Counter(ids["order"])


def test_a_crash_between_two_routed_tables_is_recovered_exactly_once_per_table(spark, fresh) -> None:
    settings = fresh(shards=2, prefix="rtc")
    sent, ids = typed_records(40)
    put(settings, sent)
    clicks, orders = (settings.companion_table_name(suffix) for suffix in ("clicks", "orders"))
    # Tables commit in name order: the events table (positions only), clicks, orders. The second
    # point is after clicks committed and before orders did.
    with pytest.raises(IngestError, match="SimulatedCrashError"):
        drain(spark, settings, routing=MAPPED, fault_hook=crash_at_table(2), batch_retries=0)
    assert ids_in(spark, clicks) == Counter(ids["click"])
    assert ids_in(spark, orders) == Counter()

    put(settings, typed_records(44)[0][40:44])  # and a few more records after the restart
    drain(spark, settings, routing=MAPPED)
    more = {kind: {f"ev-{n}" for n in range(40, 44) if ("click", "order", "click", "view")[n % 4] == kind}
            for kind in ("click", "order")}  # fmt: skip
    assert ids_in(spark, clicks) == Counter(ids["click"] | more["click"])
    assert ids_in(spark, orders) == Counter(ids["order"] | more["order"])
    assert rejects_by_reason(spark, settings) == Counter({UNKNOWN_ROUTE: len(ids["view"]) + 1, "invalid_json": 1})


def route_by_user(frame):
    """Users u1 and u3 to ``<table>_odd``, the others to ``<table>_even`` (a route function)."""
    from pyspark.sql import functions as F  # noqa: N812

    return F.when(F.col("user_id").isin("u1", "u3"), F.lit("odd")).otherwise(F.lit("even"))


def test_a_route_function_inside_kpl_aggregates_across_a_crash(spark, fresh) -> None:
    """Batches end inside aggregates; the crash leaves one routed table's position inside one, the
    other's behind it; the restart writes each table's rows once. Without dedupe, so that only the
    positions (and the ids of the user records they cover inside an aggregate) keep the rows out."""
    settings = fresh(prefix="rtkpl")
    records = user_records(0, 120)
    send_aggregated(settings, records, per_aggregate=7)
    odd = {r.event_id for r in records if r.partition_key in ("u1", "u3")}
    even = {r.event_id for r in records} - odd
    route = f"{__name__}:route_by_user"

    with pytest.raises(IngestError, match="SimulatedCrashError"):
        drain(spark, settings, routing=route, fault_hook=crash_at_table(2, batch=1), batch_retries=0,
              max_records_per_shard=25, dedupe=False)  # fmt: skip
    even_table, odd_table = settings.companion_table_name("even"), settings.companion_table_name("odd")
    marks = spark.sql(f"SELECT summary['icestream.positions'] AS p FROM {even_table}.snapshots").collect()
    assert any(p.count(":") == 2 for row in marks for p in json.loads(row.p).values()), (
        "the position does not end inside an aggregate: the case is not exercised"
    )
    # Found again on restart from the events table's list (odd is behind the events table's position).
    assert routed_tables(spark, settings, Routing.parse(route), settings.stream_name) == sorted(
        [settings.table_name, even_table, odd_table]
    )
    drain(spark, settings, routing=route, max_records_per_shard=25, dedupe=False)
    assert ids_in(spark, even_table) == Counter(even)
    assert ids_in(spark, odd_table) == Counter(odd)


def test_the_cli_routes_by_field_into_tables_made_on_first_sight(spark, fresh, monkeypatch) -> None:
    settings = fresh(shards=1, prefix="rtcli")
    sent, ids = typed_records(12)
    put(settings, sent)
    monkeypatch.setenv("ICESTREAM_STREAM_NAME", settings.stream_name)
    monkeypatch.setenv("ICESTREAM_TABLE", settings.table)
    assert main(["ingest", "--available-now", "--trigger", "0s", "--quiet", "--route", "event_type"]) == 0
    for kind in ("click", "order", "view"):
        assert ids_in(spark, settings.companion_table_name(kind)) == Counter(ids[kind])
    assert rejects_by_reason(spark, settings) == Counter({"invalid_json": 1})


def test_two_creators_of_one_routed_table_both_end_up_using_it(spark, fresh) -> None:
    settings = fresh(shards=1, prefix="rtrace")
    names = [settings.companion_table_name(f"race{number}") for number in range(3)]
    results: list[str] = []
    errors: list[BaseException] = []

    def create(name: str) -> None:
        try:
            results.append(create_routed_table(spark, settings, name))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    for name in names:
        threads = [threading.Thread(target=create, args=(name,)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors
    assert sorted(results) == sorted(names * 2)
    for name in names:
        assert spark.table(name).columns == spark.table(settings.table_name).columns
        assert "hours(event_ts)" in spark.sql(f"SHOW CREATE TABLE {name}").first()[0]


def foreign_pipeline(spark, events: Settings, suffix: str) -> tuple[Settings, dict[str, int]]:
    """Another pipeline whose events table is ``<events table>_<suffix>``, fed by its own stream, ingested
    once (one event and one malformed record, so that its rejects table holds a row too).

    Returns:
        Its settings, and the row count of each of its two tables.
    """
    other = load_settings(stream_name=f"{events.stream_name}-{suffix}", table=f"{events.table}_{suffix}")
    ensure_stream(other, shard_count=1)
    setup_tables(spark, other)
    put(other, [(event_payload(0, "u0", event_id="theirs-0"), "u0"), (b"not json", "u0")])
    drain(spark, other)
    return other, {name: spark.table(name).count() for name in (other.table_name, other.rejects_table_name)}


def event(event_id: str, kind: str) -> tuple[bytes, str]:
    """The issue's event: ``event_id`` of type ``kind``, with no other field than those the schema requires."""
    payload = {"event_id": event_id, "user_id": "u", "event_type": kind, "event_ts": "2026-11-26T21:00:00Z"}
    return json.dumps(payload).encode(), "u"


def source_stream(spark, table: str) -> str:
    properties = {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    return properties[SOURCE_PROPERTY]


@pytest.mark.parametrize("unknown", ["default", "reject"])
def test_a_value_naming_another_pipelines_table_never_writes_into_it(spark, fresh, unknown) -> None:
    """Issue 43: ``--route event_type`` on t2 beside another pipeline's t2_orders (and its t2_orders_rejects).

    The value ``orders_rejects`` names the other pipeline's rejects table and ``orders`` its events
    table; before the fix the first lost x1 (a row of NULLs in t2_orders_rejects), the second wrote
    x2 into t2_orders, both took the tables' ``icestream.source-stream``, and the owner's ingest failed.
    """
    settings = fresh(shards=1, prefix="rtown")
    other, counts = foreign_pipeline(spark, settings, "orders")
    put(settings, [event("x1", "orders_rejects"), event("x2", "orders"), event("x3", "click")])
    routing = {"route": "event_type", "route_unknown": unknown}
    query = drain(spark, settings, routing=routing)

    refused = Counter({"x1": 1, "x2": 1})
    assert ids_in(spark, settings.companion_table_name("click")) == Counter({"x3": 1})
    spark.catalog.refreshTable(settings.rejects_table_name)
    rejected = spark.table(settings.rejects_table_name).where(f"reason = '{UNKNOWN_ROUTE}'").collect()
    if unknown == "default":
        assert ids_in(spark, settings.table_name) == refused
        assert rejected == []
        assert sum(batch["written"] for batch in query.recent_progress) == 3
    else:
        assert ids_in(spark, settings.table_name) == Counter()
        details = {json.loads(row.raw_text)["event_id"]: row.detail for row in rejected}
        assert Counter(json.loads(row.raw_text)["event_id"] for row in rejected) == refused
        assert other.rejects_table_name in details["x1"]  # the detail names the table refused
        assert other.table_name in details["x2"]
    for table in (other.table_name, other.rejects_table_name):
        spark.catalog.refreshTable(table)
        assert spark.table(table).count() == counts[table], f"{table} was written"
        assert source_stream(spark, table) == other.stream_name
    assert routed_tables(spark, settings, Routing.parse("event_type"), settings.stream_name) == sorted(
        [settings.table_name, settings.companion_table_name("click")]
    )

    # Both restart: the routed ingest with one more event, the owner with one more of its own.
    put(settings, [event("x4", "click")])
    drain(spark, settings, routing=routing)
    assert ids_in(spark, settings.companion_table_name("click")) == Counter({"x3": 1, "x4": 1})
    put(other, [(event_payload(1, "u0", event_id="theirs-1"), "u0")])
    drain(spark, other)
    assert ids_in(spark, other.table_name) == Counter({"theirs-0": 1, "theirs-1": 1})


def test_a_routed_table_made_before_owners_were_recorded_stays_the_routes(spark, fresh) -> None:
    settings = fresh(shards=1, prefix="rtold")
    clicks = settings.companion_table_name("click")
    # Made as the ingest made routed tables before they recorded their owner (no icestream.routed-from).
    create_routed_table(spark, settings, clicks)
    mark_source_stream(spark, clicks, settings.stream_name)
    remember_routed_table(spark, settings, clicks)
    put(settings, [event("y1", "click")])
    drain(spark, settings, routing="event_type")
    assert ids_in(spark, clicks) == Counter({"y1": 1})
    assert ids_in(spark, settings.table_name) == Counter()

    # A mapping that names another pipeline's table stops the ingest before it writes anything.
    other, counts = foreign_pipeline(spark, settings, "orders")
    put(settings, [event("y2", "order")])
    with pytest.raises((ConfigError, IngestError), match="is named by route_tables or route_default"):
        drain(spark, settings, routing={"route": "event_type", "route_tables": "order=orders,click=click"})
    assert spark.table(other.table_name).count() == counts[other.table_name]
    assert source_stream(spark, other.table_name) == other.stream_name
