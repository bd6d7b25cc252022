"""The ingest on Kafka: Spark's Kafka source into the ingest's sink, on the session's real broker."""

from __future__ import annotations

from icestream.ingest.reading.kafka_read import partition_id, stream_label
from tests.helpers.ingest import assert_accounted, drain, table_state
from tests.helpers.streams import mixed_records
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
