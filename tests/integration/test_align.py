"""align_columns: the table's columns in its order, a missing one filled from the extras, then the
properties, cast to the column's type; names and keys that need quoting in SQL text stay intact."""

from __future__ import annotations

from pyspark.sql import types as T  # noqa: N812 - the conventional alias

from icestream.lake.table_evolution import align_columns

SCHEMA = "event_id string, properties map<string,string>, extras map<string,string>"
FIELDS = T.StructType([
    T.StructField("event_id", T.StringType()), T.StructField("coupon", T.LongType()),
    T.StructField("it's", T.StringType()), T.StructField("odd`name", T.DoubleType()),
]).fields  # fmt: skip


def test_missing_columns_come_from_the_extras_then_the_properties_cast_to_their_types(spark) -> None:
    frame = spark.createDataFrame(
        [("a", {"coupon": "12", "it's": "x", "odd`name": "1.5"}, {"coupon": "i:7"}),
         ("b", {"coupon": "not a number"}, None)],
        SCHEMA,
    )  # fmt: skip
    with_extras = align_columns(frame, FIELDS, "extras")
    assert with_extras.columns == ["event_id", "coupon", "it's", "odd`name"]
    rows = [tuple(row) for row in with_extras.orderBy("event_id").collect()]
    assert rows == [("a", 7, "x", 1.5), ("b", None, None, None)]
    from_properties = align_columns(frame.drop("extras"), FIELDS, "extras")
    assert [tuple(row) for row in from_properties.orderBy("event_id").collect()] == [
        ("a", 12, "x", 1.5), ("b", None, None, None),
    ]  # fmt: skip
