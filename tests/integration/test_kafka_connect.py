"""Iceberg's Kafka Connect sink run for real: a standalone worker on the session's broker and the project's catalog.

The worker (``icestream.kafka.connect_worker``) runs the reference configuration's options where they
apply: ``errors.tolerance=all`` with a dead-letter topic, the ``InsertField`` transform, a commit
interval. What its dead-letter topic catches is what Connect's converter and transforms refuse; a record
they pass but the sink cannot write into the table's columns is another matter (the second test).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from icestream.kafka.connect_worker import ConnectWorker, sink_spec
from icestream.kafka.connection import kafka_connection
from icestream.kafka.topics import offsets
from icestream.synthetic.malformed import malformed_payload
from tests.helpers.streams import event_payload
from tests.helpers.topics import consume, send
from tests.helpers.waiting import wait_until

# The malformed kinds Connect's JsonConverter or the InsertField transform refuses: errors.tolerance=all
# sends them to the dead-letter topic.
DEAD_LETTER_KINDS = ("invalid_json", "truncated_json", "json_array", "bad_number", "non_utf8")
COMMIT_INTERVAL_MS = 1000
LANDING_SECONDS = 180.0  # a bound on the first commits (the sink's first one waits out its 30 s timeout)


def table_rows(spark, name: str) -> list:
    spark.catalog.refreshTable(name)
    return spark.table(name).select("event_id", "shard_id", "sequence_number", "arrival_ts").collect()


def records_in(connection, topic: str) -> int:
    """How many records a topic holds, from its partitions' offsets (none deleted here)."""
    return sum(part.high - part.low for part in offsets(connection, topic).values())


def test_good_records_land_once_each_and_bad_ones_go_to_the_dead_letter_topic(spark, kafka_fresh) -> None:
    settings = kafka_fresh(partitions=2, prefix="kconnect")
    connection = kafka_connection(settings)
    spec = sink_spec(settings, partition_count=2, commit_interval_ms=COMMIT_INTERVAL_MS)
    good = [(event_payload(number, f"u{number % 3}"), f"u{number % 3}") for number in range(60)]
    bad = [(malformed_payload(kind), f"bad-{kind}") for kind in DEAD_LETTER_KINDS]
    placed = send(settings, good[:30] + bad + good[30:])
    where = {f"ev-{number}": place for number, place in enumerate(placed[:30] + placed[30 + len(bad) :])}
    worker = ConnectWorker.from_settings(settings)
    worker.start(settings, connection, spec)
    try:
        wait_until(
            lambda: len(table_rows(spark, settings.table_name)) >= len(good), LANDING_SECONDS, interval=1.0,
            message="the 60 good events in the sink's table",
        )  # fmt: skip
        dead = wait_until(
            lambda: (count := records_in(connection, spec.dead_letter_topic)) >= len(bad) and count, 60.0, interval=0.5
        )
        status = worker.connector_status()
    finally:
        worker.stop()
    assert status is not None
    assert status.running, status
    rows = table_rows(spark, settings.table_name)
    assert Counter(row.event_id for row in rows) == Counter(where.keys()), "each good event exactly once"
    # InsertField put each record's partition, offset and Kafka timestamp into the row.
    assert {row.event_id: (int(row.shard_id), int(row.sequence_number)) for row in rows} == where
    assert all(row.arrival_ts is not None for row in rows)
    # The dead-letter topic is at least once: a record redelivered after a rebalance (the two tasks join one at
    # a time) is reported again, outside the sink's transactions. Each bad record is there, as sent.
    assert dead >= len(bad)
    letters = consume(dataclasses.replace(connection, topic=spec.dead_letter_topic), dead, group="dlq-reader")
    assert len(letters) == dead
    assert {key.decode() for _, _, key, _ in letters} == {key for _, key in bad}
    assert {(key.decode(), value) for _, _, key, value in letters} == {(key, data) for data, key in bad}


def test_a_record_the_sink_cannot_convert_stops_its_task_and_misses_the_dead_letter_topic(spark, kafka_fresh) -> None:
    settings = kafka_fresh(partitions=1, prefix="kconnect")
    connection = kafka_connection(settings)
    spec = sink_spec(settings, partition_count=1, commit_interval_ms=COMMIT_INTERVAL_MS)
    worker = ConnectWorker.from_settings(settings)
    worker.start(settings, connection, spec)
    try:
        # JSON the converter and InsertField accept, whose event_ts no timestamp column takes (month 13).
        send(settings, [(malformed_payload("bad_timestamp"), "bad"), (event_payload(1, "u1"), "u1")])
        status = wait_until(
            lambda: (found := worker.connector_status()) is not None and "FAILED" in found.tasks and found,
            LANDING_SECONDS, interval=0.5, message="the task to fail",
        )  # fmt: skip
    finally:
        worker.stop()
    assert "DateTimeParseException" in status.trace, status.trace[:2000]
    assert status.connector == "RUNNING"  # the connector stays up with its only task dead
    assert records_in(connection, spec.dead_letter_topic) == 0
    assert table_rows(spark, settings.table_name) == []  # the good event behind it never arrives
