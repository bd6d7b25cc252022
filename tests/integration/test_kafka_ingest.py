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


def test_routing_and_a_new_field_work_on_kafka_as_on_kinesis(spark, kafka_fresh) -> None:
    import json

    settings = kafka_fresh(partitions=2)
    sent, ids = [], {"click": set(), "order": set(), "view": set()}
    for number in range(40):
        user, kind = f"u{number % 5}", ("click", "order", "click", "view")[number % 4]
        event = json.loads(event_payload(number, user)) | {"event_type": kind, "coupon": f"c{number}"}
        sent.append((json.dumps(event).encode(), user))
        ids[kind].add(f"ev-{number}")
    send(settings, sent)
    routing = {"route": "event_type", "route_tables": "order=orders,click=clicks", "route_unknown": "reject"}
    drain(spark, settings, source="kafka", routing=routing, schema_evolution="add-columns")
    for kind, suffix in (("click", "clicks"), ("order", "orders")):
        table = settings.companion_table_name(suffix)
        rows = spark.table(table).select("event_id", "coupon").collect()
        assert {row.event_id for row in rows} == ids[kind]
        assert all(row.coupon == f"c{row.event_id.split('-')[1]}" for row in rows)
    reasons = Counter(row.reason for row in spark.table(settings.rejects_table_name).select("reason").collect())
    assert reasons == Counter({"unknown_route": len(ids["view"])})


def test_a_change_stream_on_kafka_ends_equal_to_its_truth_read_by_duckdb(spark, kafka_fresh) -> None:
    from icestream.ingest.changes import ChangeSpec
    from icestream.lake.table import LakeTable
    from icestream.synthetic.entities import ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER, order_changes
    from tests.helpers.changes import duckdb_rows, expected_rows, rejected_reasons

    settings = kafka_fresh(partitions=2, prefix="kcdc", tables=False)
    stream = order_changes(orders=20, changes=200, seed=5, shape="flat")
    spec = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER, "flat")
    half = len(stream.records) // 2
    for part in (stream.records[:half], stream.records[half:]):
        send(settings, part)
        drain(spark, settings, source="kafka", changes=spec, dedupe=False)
    spark.catalog.refreshTable(settings.table_name)
    assert duckdb_rows(LakeTable(spark, settings.table_name)) == expected_rows(stream)
    assert sum(rejected_reasons(spark, settings).values()) == stream.sent["malformed"]


def test_the_aggregate_follows_a_kafka_fed_table(spark, kafka_fresh) -> None:
    settings = kafka_fresh(partitions=2)
    send(settings, [(event_payload(number, f"u{number % 4}"), f"u{number % 4}") for number in range(30)])
    drain(spark, settings, source="kafka", metrics=True)
    total = spark.sql(f"SELECT sum(events) AS n FROM {settings.metrics_table_name}").collect()[0].n
    assert total == 30


def test_a_topic_deleted_and_made_again_is_read_from_its_start(spark, kafka_fresh) -> None:
    from confluent_kafka.admin import AdminClient

    from icestream.kafka.connection import kafka_connection
    from icestream.kafka.topics import ensure_topic, partitions
    from tests.helpers.waiting import wait_until

    settings = kafka_fresh(partitions=1)
    connection = kafka_connection(settings)
    send(settings, [(event_payload(number, "u1"), "u1") for number in range(8)])
    drain(spark, settings, source="kafka")
    admin = AdminClient(connection.client_config())
    for future in admin.delete_topics([settings.kafka_topic]).values():
        future.result(30)

    def made_again() -> bool:
        try:
            ensure_topic(connection, 1)
            return partitions(connection) == [0]
        except Exception:  # noqa: BLE001 - the broker finishes the deletion first
            return False

    wait_until(made_again, 60, interval=0.5, message="the topic made again")
    send(settings, [(event_payload(number, "u1"), "u1") for number in range(100, 103)])  # offsets 0-2 again
    drain(spark, settings, source="kafka")
    found = table_state(spark, settings)[0]
    assert found == Counter([*(f"ev-{number}" for number in range(8)), "ev-100", "ev-101", "ev-102"])
