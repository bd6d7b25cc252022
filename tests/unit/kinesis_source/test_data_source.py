"""The ``kinesis`` data source and its registration, without a SparkSession."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pyspark
import pytest

from icestream.errors import ConfigError
from icestream.kinesis_source import data_source, session
from icestream.kinesis_source.data_source import KinesisDataSource
from icestream.kinesis_source.rows import SCHEMA_DDL
from icestream.kinesis_source.stream_reader import KinesisStreamReader
from icestream.runtime.shipping import ENV_ALIAS, EXECUTOR_PYTHON


class FakeSpark:
    """Records the data sources registered with it."""

    def __init__(self, python: str = "python3") -> None:
        self.registered: list[type] = []
        self.dataSource = self  # spark.dataSource.register(...)
        self.sparkContext = types.SimpleNamespace(pythonExec=python)  # the interpreter its Python code runs in

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


def test_register_makes_the_format_known(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    spark = FakeSpark()
    data_source.register(spark)
    assert spark.registered == [KinesisDataSource]
    assert list(tmp_path.iterdir()) == []  # an interpreter of the nodes' own: nothing to link


def test_a_shipped_environment_runs_on_the_driver_through_a_link_to_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Spark plans a Python source's batches on the driver with the executors' interpreter path."""
    monkeypatch.chdir(tmp_path)
    spark = FakeSpark(python=EXECUTOR_PYTHON)
    data_source.register(spark)
    assert spark.registered == [KinesisDataSource]
    assert (tmp_path / EXECUTOR_PYTHON).resolve() == (Path(sys.prefix) / "bin" / "python").resolve()
    data_source.register(spark)  # again: the link is kept


def test_a_folder_of_the_users_under_the_environments_name_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ENV_ALIAS).mkdir()
    data_source.register(FakeSpark(python=EXECUTOR_PYTHON))
    assert not (tmp_path / ENV_ALIAS).is_symlink()
    assert list((tmp_path / ENV_ALIAS).iterdir()) == []


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
