"""A keyed table's declaration and the MERGE that keeps it: checked without Spark."""

from __future__ import annotations

import pytest

from icestream.errors import ConfigError
from icestream.lake.keyed import KeyedSpec, merge_statement, newer_condition


def test_a_declaration_normalises_names_types_and_aliases() -> None:
    spec = KeyedSpec.parse("Order_ID long, status STRING, amount float8, v integer, ok bool", "order_id", "V")
    assert spec.columns == (("order_id", "bigint"), ("status", "string"), ("amount", "double"), ("v", "int"),
                            ("ok", "boolean"))  # fmt: skip
    assert (spec.key, spec.order) == (("order_id",), "v")
    assert spec.columns_ddl()[:2] == ("order_id BIGINT NOT NULL", "status STRING")
    assert KeyedSpec.parse("a bigint, b string", "a, b").key == ("a", "b")
    assert spec.to_json() == KeyedSpec.parse("order_id bigint, status string, amount double, v int, ok boolean",
                                             ("order_id",), "v").to_json()  # fmt: skip


@pytest.mark.parametrize(
    ("columns", "key", "order", "message"),
    [
        ("", "id", None, "declare the table's columns"),
        ("id", "id", None, "is not 'name type'"),
        ("id uuid", "id", None, "type 'uuid'"),
        ("id bigint, id string", "id", None, "declared twice"),
        ("id bigint, is_deleted boolean", "id", None, "keeps that name"),
        ("id bigint, shard_id string", "id", None, "keeps that name"),
        ("id-x bigint", "id", None, "identifier"),
        ("id bigint", "other", None, "changes key"),
        ("id bigint", "", None, "changes key"),
        ("id bigint, name string", "id", "name", "changes order"),
        ("id bigint, v bigint", "id", "id", "changes order"),
        ("id bigint", "id", "missing", "changes order"),
    ],
)
def test_a_bad_declaration_says_what_to_write(columns: str, key: str, order: str | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        KeyedSpec.parse(columns, key, order)


def test_the_merge_applies_the_order_rule_and_names_only_checked_identifiers() -> None:
    spec = KeyedSpec.parse("a bigint, b string, v bigint", "a, b", "v")
    statement = merge_statement("lake.db.orders", "icestream_changes_1", spec)
    assert statement.sql == (
        "MERGE INTO lake.db.orders t\nUSING icestream_changes_1 s\nON t.a = s.a AND t.b = s.b\n"
        "WHEN MATCHED AND (s.v > t.v OR (s.v = t.v AND (s.is_deleted OR NOT t.is_deleted))) THEN UPDATE SET *\n"
        "WHEN NOT MATCHED THEN INSERT *"
    )
    assert newer_condition(KeyedSpec.parse("a bigint", "a")) == "TRUE"  # no order: the later arrival wins
    with pytest.raises(ConfigError):
        merge_statement("lake.db.orders; DROP", "view", spec)
    with pytest.raises(ConfigError):
        merge_statement("lake.db.orders", "x y", spec)
