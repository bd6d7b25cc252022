"""The ``kinesis`` data source and its registration, without a SparkSession."""

from __future__ import annotations

from typing import Any

import pyspark
import pytest

from icestream.errors import ConfigError
from icestream.kinesis_source import data_source, session
from icestream.kinesis_source.data_source import KinesisDataSource
from icestream.kinesis_source.rows import SCHEMA_DDL
from icestream.kinesis_source.stream_reader import KinesisStreamReader


class FakeSpark:
    """Records the data sources registered with it."""

    def __init__(self) -> None:
        self.registered: list[type] = []
        self.dataSource = self  # spark.dataSource.register(...)

    def register(self, source: type) -> None:
        self.registered.append(source)


def test_the_source_is_named_kinesis_and_has_the_rows_schema() -> None:
    source = KinesisDataSource({"streamname": "events", "regionname": "eu-west-1"})
    assert KinesisDataSource.name() == "kinesis"
    assert source.schema() == SCHEMA_DDL
    reader = source.streamReader(None)
    assert isinstance(reader, KinesisStreamReader)
    assert (reader.options.stream_name, reader.options.region) == ("events", "eu-west-1")


def test_a_bad_option_stops_the_query_before_it_starts() -> None:
    with pytest.raises(ConfigError, match="no option 'shards'"):
        KinesisDataSource({"streamName": "events", "regionName": "eu-west-1", "shards": "2"})


def test_register_makes_the_format_known() -> None:
    spark = FakeSpark()
    data_source.register(spark)
    assert spark.registered == [KinesisDataSource]


@pytest.mark.parametrize(("version", "has"), [("3.5.3", False), ("4.0.0", True), ("4.1.1", True)])
def test_python_sources_come_with_spark_4(monkeypatch: pytest.MonkeyPatch, version: str, has: bool) -> None:
    monkeypatch.setattr(pyspark, "__version__", version)
    assert session.has_python_sources() is has


@pytest.mark.parametrize(("version", "registered"), [("3.5.3", []), ("4.1.1", [KinesisDataSource])])
def test_get_spark_registers_the_source_where_spark_has_python_sources(
    monkeypatch: pytest.MonkeyPatch, version: str, registered: list[type]
) -> None:
    spark = FakeSpark()
    asked: list[tuple[Any, ...]] = []

    def get_spark(settings: Any, app_name: str, drain: bool) -> FakeSpark:
        asked.append((settings, app_name, drain))
        return spark

    monkeypatch.setattr(pyspark, "__version__", version)
    monkeypatch.setattr(session.runtime_spark, "get_spark", get_spark)
    assert session.get_spark(None, "app", drain=True) is spark
    assert asked == [(None, "app", True)]
    assert spark.registered == registered
