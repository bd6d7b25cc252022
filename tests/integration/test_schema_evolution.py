"""Schema evolution of payloads against the emulator: new fields become columns, conflicts become rejects."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from icestream.config import Settings
from icestream.errors import IngestError
from icestream.ingest.schema_evolution import ADDED_KEY, CONFLICT
from icestream.lake.table import LakeTable
from icestream.queries import duckdb_engine as duck
from tests.helpers.crash import SimulatedCrashError
from tests.helpers.ingest import drain, refresh_tables
from tests.helpers.streams import event_payload, put


def with_fields(number: int, **fields: object) -> tuple[bytes, str]:
    """Event ``ev-<number>`` of user ``u<number % 3>`` with extra top-level ``fields``."""
    user = f"u{number % 3}"
    return json.dumps(json.loads(event_payload(number, user)) | fields).encode(), user


def columns(spark, table: str) -> dict[str, str]:
    spark.catalog.refreshTable(table)
    return {field.name: field.dataType.simpleString() for field in spark.table(table).schema.fields}


def values(spark, table: str, column: str) -> dict[str, object]:
    return {row.event_id: row[column] for row in spark.table(table).select("event_id", column).collect()}


def rejects(spark, settings: Settings) -> list:
    spark.catalog.refreshTable(settings.rejects_table_name)
    return spark.table(settings.rejects_table_name).orderBy("sequence_number").collect()


def test_new_fields_become_typed_columns_from_the_batch_that_brings_them(spark, fresh) -> None:
    settings = fresh(shards=1, prefix="evo")
    put(settings, [with_fields(n) for n in range(4)])
    drain(spark, settings, schema_evolution="add-columns")
    before = columns(spark, settings.table_name)

    put(settings, [with_fields(n, coupon=f"C{n}", qty=n, price=n + 0.25, gift=n % 2 == 0) for n in range(4, 8)])
    # A value its column cannot hold: qty is inferred bigint from the four above (majority), "many" is not.
    put(settings, [with_fields(8, coupon="C8", qty=1, price=1.0, gift=True), with_fields(9, qty="many")])
    query = drain(spark, settings, schema_evolution="add-columns")

    after = columns(spark, settings.table_name)
    assert set(after) - set(before) == {"coupon", "qty", "price", "gift"}
    assert (after["coupon"], after["qty"], after["price"], after["gift"]) == ("string", "bigint", "double", "boolean")
    assert values(spark, settings.table_name, "qty") == {f"ev-{n}": (n if n >= 4 else None) for n in range(8)} | {
        "ev-8": 1
    }
    assert values(spark, settings.table_name, "coupon")["ev-5"] == "C5"
    assert values(spark, settings.table_name, "price")["ev-5"] == 5.25
    assert values(spark, settings.table_name, "gift")["ev-5"] is False
    # The new fields are columns, not properties.
    properties = spark.table(settings.table_name).where("event_id = 'ev-5'").first().properties
    assert set(properties) == {"n"}
    (conflict,) = rejects(spark, settings)
    assert conflict.reason == CONFLICT
    assert conflict.detail == "field qty: a string where column qty is bigint"
    assert json.loads(conflict.raw_text)["event_id"] == "ev-9", "the payload as sent"
    assert sum(batch["written"] for batch in query.recent_progress) == 5
    assert any(batch["schema_changes"] for batch in query.recent_progress)
    # The commit of the batch that added the columns names them.
    named = [row.a for row in spark.sql(f"SELECT summary['{ADDED_KEY}'] AS a FROM {settings.table_name}.snapshots")
             .collect() if row.a]  # fmt: skip
    assert named == ["coupon string,gift boolean,price double,qty bigint"]
    # A second engine reads the evolved table and its new column.
    location, _ = LakeTable(spark, settings.table_name).inspect.metadata_location()
    connection = duck.connect()
    try:
        scanned = dict(connection.execute(f"SELECT event_id, qty FROM iceberg_scan('{location}')").fetchall())
    finally:
        connection.close()
    assert scanned == values(spark, settings.table_name, "qty")


def test_off_keeps_new_fields_in_properties(spark, fresh) -> None:
    settings = fresh(shards=1, prefix="evoff")
    put(settings, [with_fields(n, coupon=f"C{n}", qty=n) for n in range(3)])
    drain(spark, settings)
    assert "coupon" not in columns(spark, settings.table_name)
    row = spark.table(settings.table_name).where("event_id = 'ev-2'").first()
    assert (row.properties["coupon"], row.properties["qty"]) == ("C2", "2")


@pytest.mark.parametrize("mode", ["add-columns", "add-and-widen"])
def test_an_int_column_widens_only_in_add_and_widen(spark, fresh, mode: str) -> None:
    settings = fresh(shards=1, prefix="evw")
    spark.sql(f"ALTER TABLE {settings.table_name} ADD COLUMNS (rank INT, score FLOAT)")
    put(settings, [with_fields(0, rank=5, score=0.5), with_fields(1, rank=2**40, score=0.1)])
    drain(spark, settings, schema_evolution=mode)
    found = columns(spark, settings.table_name)
    if mode == "add-and-widen":
        assert (found["rank"], found["score"]) == ("bigint", "double")
        assert values(spark, settings.table_name, "rank") == {"ev-0": 5, "ev-1": 2**40}
        assert values(spark, settings.table_name, "score") == {"ev-0": 0.5, "ev-1": 0.1}
        assert rejects(spark, settings) == []
    else:
        assert (found["rank"], found["score"]) == ("int", "float")
        assert values(spark, settings.table_name, "rank") == {"ev-0": 5}
        assert [row.detail for row in rejects(spark, settings)] == [
            "field rank: a 64-bit integer where column rank is int"
        ]


def test_a_crash_after_the_column_add_is_recovered_with_the_column_filled_once(spark, fresh) -> None:
    settings = fresh(shards=2, prefix="evc")
    put(settings, [with_fields(n, coupon=f"C{n}") for n in range(10)] + [with_fields(10, coupon=7)])

    def crash(phase: str, batch_id: object) -> None:
        if phase == "between_commits":  # the column is added and the rejects committed, the events not yet
            raise SimulatedCrashError("crash before the events commit")

    with pytest.raises(IngestError, match="SimulatedCrashError"):
        drain(spark, settings, schema_evolution="add-columns", fault_hook=crash, batch_retries=0)
    assert columns(spark, settings.table_name)["coupon"] == "string"
    assert spark.table(settings.table_name).count() == 0
    assert [row.reason for row in rejects(spark, settings)] == [CONFLICT]

    refresh_tables(spark, settings)
    drain(spark, settings, schema_evolution="add-columns")
    assert Counter(values(spark, settings.table_name, "coupon").values()) == Counter(f"C{n}" for n in range(10))
    assert [row.reason for row in rejects(spark, settings)] == [CONFLICT], "the reject is not written twice"


def test_routed_tables_each_gain_only_the_columns_their_own_rows_bring(spark, fresh) -> None:
    settings = fresh(shards=2, prefix="evr")
    kinds = ("click", "order", "view")
    sent = []
    for n in range(30):
        kind = kinds[n % 3]
        fields: dict[str, object] = {"event_type": kind}
        if kind == "order":
            fields["amount"] = n + 0.5
        if n >= 15:
            fields["coupon"] = f"C{n}"  # the producers' new field from event 15 on, on every kind
        sent.append(with_fields(n, **fields))
    put(settings, sent[:15])
    drain(spark, settings, routing="event_type", schema_evolution="add-columns")
    put(settings, sent[15:])
    drain(spark, settings, routing="event_type", schema_evolution="add-columns")

    tables = {kind: settings.companion_table_name(kind) for kind in kinds}
    assert columns(spark, tables["order"])["amount"] == "double"
    assert "amount" not in columns(spark, tables["click"])
    assert "amount" not in columns(spark, tables["view"])
    for kind, table in tables.items():
        coupons = values(spark, table, "coupon")
        expected = {f"ev-{n}": (f"C{n}" if n >= 15 else None) for n in range(30) if kinds[n % 3] == kind}
        assert coupons == expected, kind
    assert "coupon" not in columns(spark, settings.table_name), "no row went to the events table"
    assert values(spark, tables["order"], "amount")["ev-4"] == 4.5


def keep_table_columns(frame):
    """A transform that returns only the table's columns (it drops the new fields and the payload)."""
    from icestream.lake.schema import table_columns

    return frame.select(*table_columns(), "extras")


def test_a_conflict_after_a_transform_that_dropped_the_payload_is_rejected_with_the_row(spark, fresh) -> None:
    settings = fresh(shards=1, prefix="evt")
    put(settings, [with_fields(n, qty=n) for n in range(3)] + [with_fields(3, qty="many")])
    drain(spark, settings, schema_evolution="add-columns", transform=keep_table_columns)
    assert values(spark, settings.table_name, "qty") == {"ev-0": 0, "ev-1": 1, "ev-2": 2}
    (conflict,) = rejects(spark, settings)
    assert conflict.reason == CONFLICT
    assert json.loads(conflict.raw_text)["event_id"] == "ev-3"
