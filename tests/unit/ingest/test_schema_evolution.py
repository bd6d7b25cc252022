"""Schema evolution's pure parts: how a value is tagged, how a new column's type is chosen, what a plan does."""

from __future__ import annotations

import json

import pytest

from icestream.ingest.parse import ParsedEvent, parse_payload
from icestream.ingest.schema_evolution import evolvable_field, infer_type, plan_table, tag_value
from tests.helpers.samples import event


@pytest.mark.parametrize(
    ("value", "tagged"),
    [
        ("SPRING", "s:SPRING"),
        ("", "s:"),
        (True, "b:true"),
        (False, "b:false"),
        (7, "i:7"),
        (-(2**31), "i:-2147483648"),
        (2**31, "l:2147483648"),
        (2**63, "x:9223372036854775808"),
        (0.5, "f:0.5"),  # a 32-bit float holds it exactly
        (0.1, "d:0.1"),
        (1e300, "d:1e+300"),  # too large for a 32-bit float
        (float("inf"), "x:inf"),
        (None, None),
        ({"a": 1}, None),
        ([1], None),
    ],
)
def test_values_are_tagged_with_their_json_kind(value: object, tagged: str | None) -> None:
    assert tag_value(value) == tagged


def test_only_lower_case_identifiers_that_name_no_table_column_may_become_columns() -> None:
    assert evolvable_field("coupon")
    assert evolvable_field("_v2")
    assert not evolvable_field("Coupon")
    assert not evolvable_field("a-b")
    assert not evolvable_field("2x")
    assert not evolvable_field("shard_id")  # the ingest's own column
    assert not evolvable_field("x" * 129)


def test_parse_with_evolve_keeps_new_scalar_fields_apart_from_properties() -> None:
    payload = event(coupon="SPRING", amount=12.5, qty=3, gift=False, Code="X", nested={"a": 1}, gone=None)
    folded = parse_payload(payload)
    evolving = parse_payload(payload, evolve=True)
    assert isinstance(folded, ParsedEvent)
    assert isinstance(evolving, ParsedEvent)
    assert folded.extras is None
    assert {"coupon", "amount", "qty", "gift", "Code", "nested"} <= set(folded.properties)
    assert evolving.extras == {"coupon": "s:SPRING", "amount": "f:12.5", "qty": "i:3", "gift": "b:false"}
    # What cannot be a column stays where `off` puts it; a null is an absent field.
    assert evolving.properties["Code"] == "X"
    assert json.loads(evolving.properties["nested"]) == {"a": 1}
    assert "gone" not in evolving.properties
    assert "coupon" not in evolving.properties


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ({"i": 3}, "bigint"),
        ({"i": 3, "l": 1}, "bigint"),
        ({"i": 3, "d": 1}, "double"),
        ({"f": 1}, "double"),
        ({"s": 2, "i": 1}, "string"),
        ({"s": 1, "i": 2}, "bigint"),  # the group with most values
        ({"s": 1, "i": 1}, "string"),  # a tie: strings first
        ({"b": 1, "i": 1}, "bigint"),  # then numbers
        ({"b": 4}, "boolean"),
        ({"x": 2}, None),
        ({}, None),
    ],
)
def test_a_new_columns_type_is_the_majority_kind_group(kinds: dict[str, int], expected: str | None) -> None:
    assert infer_type(kinds) == expected


def test_plan_adds_new_fields_and_flags_conflicts_only_when_a_value_may_not_fit() -> None:
    columns = {"event_id": "string", "qty": "bigint"}
    clean = plan_table(columns, {"coupon": {"s": 5}, "qty": {"i": 4, "l": 1}}, "add-columns")
    assert clean.add == {"coupon": "string"}
    assert not clean.widen
    assert clean.types == {"coupon": "string", "qty": "bigint"}
    assert not clean.conflicts_possible
    assert clean.summary() == "coupon string"
    mixed = plan_table(columns, {"coupon": {"s": 5, "i": 1}}, "add-columns")
    assert mixed.add == {"coupon": "string"}
    assert mixed.conflicts_possible
    assert plan_table(columns, {"qty": {"d": 1}}, "add-and-widen").conflicts_possible  # no promotion to double


@pytest.mark.parametrize("mode", ["add-columns", "add-and-widen"])
def test_int_and_float_columns_widen_only_in_add_and_widen(mode: str) -> None:
    columns = {"rank": "int", "score": "float", "label": "string"}
    plan = plan_table(columns, {"rank": {"i": 2, "l": 1}, "score": {"d": 1}, "label": {"i": 1}}, mode)
    if mode == "add-and-widen":
        assert plan.widen == {"rank": "bigint", "score": "double"}
        assert plan.summary() == "rank bigint,score double"
    else:
        assert not plan.widen
        assert not plan.changes
    assert plan.conflicts_possible  # the label's integer never fits a string column


def test_a_field_no_type_holds_gets_no_column_and_its_values_conflict() -> None:
    plan = plan_table({}, {"huge": {"x": 2}}, "add-columns")
    assert not plan.add
    assert plan.types == {"huge": None}
    assert plan.conflicts_possible


def test_a_struct_column_takes_no_stream_value() -> None:
    plan = plan_table({"meta": "struct<a:string>"}, {"meta": {"s": 1}}, "add-and-widen")
    assert not plan.changes
    assert plan.conflicts_possible


def test_a_column_added_meanwhile_by_another_writer_is_planned_again_not_fatal() -> None:
    from pyspark.errors import AnalysisException
    from pyspark.sql.types import LongType, StringType, StructField

    from icestream.ingest.schema_evolution import PayloadEvolution

    schemas = [
        [StructField("event_id", StringType())],
        [StructField("event_id", StringType()), StructField("qty", LongType())],
    ]
    ran: list[str] = []

    class RacingSpark:
        def sql(self, statement: str) -> None:
            ran.append(statement)
            if len(ran) == 1:  # another ingest added qty between our plan and our ALTER
                raise AnalysisException(message="Cannot add column, because qty already exists")

    forgotten: list[str] = []
    evolution = PayloadEvolution(
        RacingSpark(), "add-columns", lambda table: schemas[min(len(ran), 1)], lambda table, _: forgotten.append(table)
    )
    plan = evolution.apply("lake.db.events", {"qty": {"i": 3}})
    assert ran == ["ALTER TABLE lake.db.events ADD COLUMNS (qty BIGINT)"]
    assert not plan.changes, "planned again from the schema that has qty: nothing left to add"
    assert plan.types == {"qty": "bigint"}
    assert forgotten == ["lake.db.events"]
