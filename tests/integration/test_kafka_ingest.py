"""The ingest on Kafka: Spark's Kafka source into the ingest's sink, on the session's real broker."""

from __future__ import annotations

from collections import Counter

import pytest

from icestream.ingest.reading.kafka_read import partition_id, stream_label
from tests.helpers.ingest import assert_accounted, drain, table_state
from tests.helpers.streams import event_payload, mixed_records
from tests.helpers.topics import send


def test_a_drain_writes_each_event_once_and_each_malformed_record_to_the_rejects(spark, kafka_fresh) -> None:
    settings = kafka_fresh(partitions=3)
    records, good, malformed = mixed_records(0, 300)
    placed = send(settings, records)
    query = drain(spark, settings, source="kafka")
    events, rejects = table_state(spark, settings)
    assert set(events) == good
    assert set(events.values()) == {1}
    assert sum(rejects.values()) == malformed
    assert set(rejects.values()) == {1}
    assert {shard for shard, _ in rejects} <= {partition_id(partition) for partition, _ in placed}
    progress = list(query.recent_progress)
    assert_accounted(progress)
    assert sum(batch["num_input_rows"] for batch in progress) == len(records)
    # The positions in the last commit: after each partition's last offset.
    last = {}
    for partition, offset in placed:
        last[partition] = max(offset, last.get(partition, -1))
    committed = query.sink.committed.events
    assert committed == {partition_id(partition): f"AFTER:{offset}" for partition, offset in last.items()}
    source = spark.sql(f"SHOW TBLPROPERTIES {settings.table_name} ('icestream.source-stream')").collect()[0].value
    assert source == stream_label(settings.kafka_topic)
    # A second drain finds nothing new and writes nothing.
    again = drain(spark, settings, source="kafka")
    assert list(again.recent_progress) == []
    assert table_state(spark, settings) == (events, rejects)


def test_a_topic_that_does_not_exist_is_one_clear_error(spark, kafka_broker: str) -> None:
    from icestream.config import load_settings
    from icestream.errors import ConfigError
    from icestream.ingest.query import start_ingest

    settings = load_settings(kafka_topic="no-such-topic", table="kafka_missing_topic")
    with pytest.raises(ConfigError, match="Kafka topic no-such-topic does not exist"):
        start_ingest(spark, settings, source="kafka", available_now=True, trigger_seconds=0)


def test_records_retention_deleted_before_they_were_read_stop_the_ingest_or_are_skipped_and_counted(
    spark, kafka_fresh
) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from icestream.errors import IngestError
    from icestream.kafka.connection import kafka_connection

    settings = kafka_fresh(partitions=1)
    send(settings, [(event_payload(number, "u1"), "u1") for number in range(10)])
    drain(spark, settings, source="kafka")
    send(settings, [(event_payload(number, "u1"), "u1") for number in range(10, 20)])
    admin = AdminClient(kafka_connection(settings).client_config())
    deleted = admin.delete_records([TopicPartition(settings.kafka_topic, 0, 15)])  # offsets 10-14 go
    for future in deleted.values():
        future.result(30)
    with pytest.raises(IngestError, match=r"partition 0: offsets 10 to 14 were deleted \(retention\)"):
        drain(spark, settings, source="kafka")
    assert table_state(spark, settings)[0] == Counter(f"ev-{number}" for number in range(10))  # nothing past them
    query = drain(spark, settings, source="kafka", fail_on_data_loss=False)
    (batch,) = query.recent_progress
    assert batch["shards"][partition_id(0)]["lost"] == 5
    assert table_state(spark, settings)[0] == Counter(f"ev-{number}" for number in [*range(10), *range(15, 20)])


def test_the_command_ingests_a_topic(spark, kafka_fresh, monkeypatch, capsys) -> None:
    from icestream import cli

    settings = kafka_fresh(partitions=2)
    send(settings, [(event_payload(number, f"u{number % 3}"), f"u{number % 3}") for number in range(25)])
    monkeypatch.setenv("ICESTREAM_KAFKA_TOPIC", settings.kafka_topic)
    monkeypatch.setenv("ICESTREAM_TABLE", settings.table)
    assert cli.main(["ingest", "--source", "kafka", "--available-now", "--quiet"]) == 0
    assert "written 25, rejected 0" in capsys.readouterr().out
    assert sum(table_state(spark, settings)[0].values()) == 25
