"""Arrow in and out of Spark without pandas on the driver (``icestream.runtime.arrow_frames``), and a
drain whose driver never needs pandas: the read job and the dedupe index's load both use them."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql.pandas import functions as pandas_functions

from icestream.runtime.arrow_frames import collect_arrow, map_in_arrow
from tests.helpers.ingest import drain, table_state
from tests.helpers.streams import event_payload, put


def without_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on the driver cannot import pandas, and pyspark's check for it fails loudly."""

    def refuse() -> None:
        raise AssertionError("the driver checked for pandas")

    monkeypatch.setattr(pandas_functions, "require_minimum_pandas_version", refuse)
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError


def plus_one(batches: Iterable[Any]) -> Iterator[Any]:
    for batch in batches:
        yield pa.RecordBatch.from_arrays([pc.add(batch.column(0), 1)], names=["n"])


def test_map_in_arrow_is_spark_s_map_in_arrow_without_pandas(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    frame = spark.range(10, numPartitions=3).withColumnRenamed("id", "n")
    expected = sorted(row.n for row in frame.mapInArrow(plus_one, "n long").collect())
    without_pandas(monkeypatch)
    with pytest.raises(AssertionError, match="checked for pandas"):
        frame.mapInArrow(plus_one, "n long")  # pyspark's own imports pandas to check its version
    mapped = map_in_arrow(frame, plus_one, "n long")
    assert sorted(row.n for row in mapped.collect()) == expected == list(range(1, 11))
    assert mapped.schema.simpleString() == "struct<n:bigint>"


def test_collect_arrow_is_to_pandas_without_pandas(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    frame = spark.createDataFrame([(3, "c"), (1, "a"), (2, None)], "n long, s string").orderBy("n")
    expected = frame.toPandas().to_dict("list")
    without_pandas(monkeypatch)
    table = collect_arrow(frame)
    assert table.to_pydict() == {"n": [1, 2, 3], "s": ["a", None, "c"]}
    assert table.to_pydict()["n"] == expected["n"]
    empty = collect_arrow(frame.where("n > 5"))
    assert (empty.num_rows, empty.schema.names) == (0, ["n", "s"])


def test_a_drain_s_driver_needs_no_pandas(spark, fresh, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = fresh(shards=2, prefix="nopandas")
    records = [(event_payload(number, f"user-{number % 5}"), f"user-{number % 5}") for number in range(60)]
    put(settings, records)
    without_pandas(monkeypatch)
    first = drain(spark, settings, tip_on_driver=False)  # every batch read by a Spark job (map_in_arrow)
    assert {batch["read_on"] for batch in first.recent_progress} == {"spark"}
    put(settings, records)  # the same events again: found through the dedupe index, loaded from the table
    second = drain(spark, settings, tip_on_driver=False)
    assert sum(batch["deduplicated"] for batch in second.recent_progress) == 60
    events, _ = table_state(spark, settings)
    assert len(events) == 60, "every event once"
    assert max(events.values()) == 1, "none twice"
