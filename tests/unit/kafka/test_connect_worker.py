"""The Kafka Connect worker's configuration without a JVM: the connector, the catalog it shares, the worker.

tests/integration/test_kafka_connect.py starts the real worker with Iceberg's sink.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from icestream.config import load_settings
from icestream.errors import ConfigError
from icestream.kafka.connect_worker import (
    CONNECTOR_CLASS,
    DEFAULT_COMMIT_INTERVAL_MS,
    ConnectorStatus,
    connector_config,
    properties_text,
    sink_catalog_properties,
    sink_spec,
    worker_properties,
)
from icestream.kafka.connection import KafkaConnection
from icestream.runtime.spark import catalog_conf
from icestream.stack import tool


@pytest.fixture
def settings(tmp_path: Path):
    return load_settings(warehouse=str(tmp_path / "warehouse"), kafka_topic="events-a", table="events_a")


def test_the_connector_keeps_the_reference_options_that_apply(settings) -> None:
    config = connector_config(settings, sink_spec(settings, partition_count=2, commit_interval_ms=1000))
    assert config["connector.class"] == CONNECTOR_CLASS == "org.apache.iceberg.connect.IcebergSinkConnector"
    assert config["topics"] == "events-a"
    assert config["errors.tolerance"] == "all"
    assert config["errors.deadletterqueue.topic.name"] == "events-a-dlq"
    assert config["errors.deadletterqueue.topic.replication.factor"] == "1"  # one broker, not the reference's 3
    assert config["transforms"] == "AddMetadata"
    assert config["transforms.AddMetadata.type"] == "org.apache.kafka.connect.transforms.InsertField$Value"
    assert config["transforms.AddMetadata.timestamp.field"] == "arrival_ts"
    assert config["iceberg.control.commit.interval-ms"] == "1000"
    assert config["iceberg.control.topic"] == "events-a-control-events_a"  # one a connector
    assert config["iceberg.tables"] == f"{settings.namespace}.events_a"
    assert config["iceberg.tables.auto-create-enabled"] == "false"
    # Options of the reference that Iceberg's sink does not have are not passed on.
    assert not {"flush.size", "iceberg.table.default.partition-spec", "iceberg.table.default.write-format"} & set(
        config
    )


def test_tasks_are_the_reference_four_at_most_and_never_more_than_the_partitions(settings) -> None:
    assert sink_spec(settings, partition_count=2).tasks_max == 2
    assert sink_spec(settings, partition_count=8).tasks_max == 4
    assert sink_spec(settings, partition_count=1).consumer_group == "connect-iceberg-sink-events_a"


def test_the_default_commit_interval_is_the_sinks_documented_five_minutes(settings) -> None:
    assert DEFAULT_COMMIT_INTERVAL_MS == 300_000
    assert sink_spec(settings, 2).commit_interval_ms == DEFAULT_COMMIT_INTERVAL_MS
    with pytest.raises(ConfigError, match="must be positive"):
        sink_spec(settings, 2, commit_interval_ms=0)


def test_the_sink_names_the_catalog_as_spark_does_with_the_same_properties(settings) -> None:
    properties = sink_catalog_properties(settings)
    assert properties["iceberg.catalog"] == settings.catalog  # the JDBC catalog's rows are keyed by this name
    spark_side = {
        key.removeprefix(f"spark.sql.catalog.{settings.catalog}."): value
        for key, value in catalog_conf(settings).items()
        if key.startswith(f"spark.sql.catalog.{settings.catalog}.")
    }
    sink_side = {
        key.removeprefix("iceberg.catalog."): value for key, value in properties.items() if key != "iceberg.catalog"
    }
    assert sink_side == spark_side
    assert sink_side["type"] == "jdbc"
    assert sink_side["uri"] == f"jdbc:sqlite:{settings.catalog_file}"


def test_the_glue_catalog_is_refused_with_what_to_do(tmp_path: Path) -> None:
    glue = load_settings(catalog_type="glue", warehouse="s3://bucket/warehouse")
    with pytest.raises(ConfigError, match="ICESTREAM_CATALOG_TYPE=jdbc"):
        sink_catalog_properties(glue)


def test_the_worker_listens_on_loopback_and_scans_only_its_plugin_folder(tmp_path: Path) -> None:
    connection = KafkaConnection("127.0.0.1:9092", "t")
    properties = worker_properties(connection, 8099, tmp_path / "plugins", tmp_path / "o", commit_interval_ms=1000)
    assert properties["listeners"] == "http://127.0.0.1:8099"
    assert properties["bootstrap.servers"] == "127.0.0.1:9092"
    assert properties["plugin.path"] == str(tmp_path / "plugins")
    assert properties["plugin.discovery"] == "only_scan"
    assert properties["consumer.max.poll.records"] == "1000"  # the reference's, where Connect reads it
    assert properties["offset.flush.interval.ms"] == "1000"  # idle tasks answer the coordinator each interval
    assert worker_properties(connection, 1, tmp_path, tmp_path, 300_000)["offset.flush.interval.ms"] == "60000"
    addresses = re.findall(r"://([^:/]+):", "\n".join(properties.values()))
    assert addresses == ["127.0.0.1"]


def test_the_worker_refuses_a_secured_cluster() -> None:
    with pytest.raises(ConfigError, match="plaintext"):
        worker_properties(KafkaConnection("b:9098", "t", security="iam"), 1, Path("p"), Path("o"), 1000)


def test_properties_text_escapes_what_java_would_misread() -> None:
    text = properties_text({"a:b=c": "x=y", "plain": "C:\\path"}, "header")
    lines = text.splitlines()
    assert lines[0] == "# header"
    assert lines[1] == "a\\:b\\=c=x=y"
    assert lines[2] == "plain=C:\\\\path"


def test_a_connector_runs_only_when_it_and_every_task_run() -> None:
    assert ConnectorStatus("RUNNING", ("RUNNING", "RUNNING"), "").running
    assert not ConnectorStatus("RUNNING", ("RUNNING", "FAILED"), "trace").running
    assert not ConnectorStatus("RUNNING", (), "").running  # no task yet


def test_the_stack_pins_a_sink_of_the_default_lines_iceberg_and_a_worker_of_the_brokers_kafka() -> None:
    from icestream import stack

    # The default line of stack.toml (4.1), not the installed pyspark's: on the 3.5 line the sink stays the same.
    assert tool("iceberg-sink").version == stack.spark_line(str(stack._document()["default"])).iceberg
    assert tool("kafka-connect").version == tool("kafka").version
