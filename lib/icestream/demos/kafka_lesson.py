"""The Kafka lesson's topic and tables, made anew each run, and the events it sends (notebook 11).

:func:`kafka_demo` makes the topic ``<kafka_topic>-kafka-demo`` (deleted if it was there, then created
with ``partitions`` partitions), drops the lesson's tables if the lesson made them (its ingest's
``<table>_kafka_demo`` with its rejects, and ``<table>_kafka_demo_reference`` and
``<table>_kafka_demo_offsets``, which the notebook's own ``CREATE TABLE`` cells make), sends one hour
of generated events keyed by their partition key (repeats of some and a few malformed ones among
them), and returns a :class:`~icestream.demos.crash.CrashDemo` over them: what was sent, per record with
its partition and offset, the settings and the environment ``icestream ingest --source kafka`` runs with.
The lesson's checkpoints and ingest files go under ``<run_dir>/kafka_demo``, removed at each start.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from icestream.config import KAFKA_DEMO_SUFFIX, KAFKA_LESSON_TABLES
from icestream.demos.crash import END, CrashDemo, ingest_environment, ingest_settings
from icestream.errors import ConfigError, IngestError, ServiceUnavailableError
from icestream.ingest.reading.kafka_read import stream_label
from icestream.kafka.connection import kafka_connection
from icestream.kafka.topics import TIMEOUT_SECONDS, ensure_topic, partitions
from icestream.lake.demo_tables import demo_mark, drop_demo_tables
from icestream.lake.statement import statements_hidden
from icestream.lake.table import setup_tables
from icestream.synthetic.generator import backfill_config, generate
from icestream.synthetic.kinds import VALID_KINDS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icestream.config import Settings
    from icestream.kafka.connection import KafkaConnection
    from icestream.synthetic.wire import Record

RUN_FOLDER = "kafka_demo"  # under run_dir: the lesson's checkpoints, its ingest's progress and Spark scratch
MADE_AGAIN_SECONDS = 60.0  # a deleted topic's name is free again once the broker finished deleting it


def kafka_demo_settings(settings: Settings) -> Settings:
    """The lesson's topic ``<kafka_topic>-kafka-demo`` and tables ``<table>_kafka_demo`` (and companions)."""
    return replace(settings.companion(KAFKA_DEMO_SUFFIX), kafka_topic=f"{settings.kafka_topic}-kafka-demo")


def kafka_lesson_table(demo: Settings, name: str) -> str:
    """One of the lesson's own tables (:data:`~icestream.config.KAFKA_LESSON_TABLES`), qualified."""
    if name not in KAFKA_LESSON_TABLES:
        raise ValueError(f"not a table of the Kafka lesson: {name!r}")
    return demo.companion_table_name(name)


def kafka_demo(
    spark: SparkSession, settings: Settings, records: int = 600, partitions_count: int = 2, seed: int = 31
) -> CrashDemo:
    """Make the lesson's topic and tables anew and send ``records`` records of one hour of events to it.

    Args:
        spark: The session (drops the lesson's tables, creates its ingest's).
        settings: The workbook's settings (see :func:`kafka_demo_settings` for the lesson's names).
        records: Records to send in all (events, repeats of some, about 2 % malformed).
        partitions_count: The topic's partitions.
        seed: The generator's seed: the same records every run.

    Raises:
        TableOwnershipError: If a table of the lesson's names exists that the lesson did not make.
        ConfigError: If no Kafka broker answers (start the local one with `icestream kafka start`).
        IngestError: If the broker did not take every record.
    """
    import pandas as pd

    demo = kafka_demo_settings(settings)
    connection = kafka_connection(demo)
    lesson = [kafka_lesson_table(demo, name) for name in KAFKA_LESSON_TABLES]
    with statements_hidden():  # the lesson's tables, made again: plumbing (the notebook types its own CREATEs)
        drop_demo_tables(spark, (demo.table_name, demo.rejects_table_name, *lesson), KAFKA_DEMO_SUFFIX)
        _topic_afresh(connection, partitions_count)
        setup_tables(spark, demo, demo_mark(KAFKA_DEMO_SUFFIX))
    folder = settings.path("run_dir") / RUN_FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "spark-local").mkdir(parents=True)
    generated, _ = generate(
        backfill_config(hours=1, records=records, end=END, seed=seed, bad_rate=0.02, duplicate_rate=0.03)
    )
    placed = send_records(connection, generated)
    sent = pd.DataFrame(
        {
            "kind": [record.kind for record in generated],
            "event_id": [record.event_id if record.kind in VALID_KINDS else None for record in generated],
            "partition": [partition for partition, _ in placed],
            "offset": [offset for _, offset in placed],
        }
    )
    ingest = replace(ingest_settings(demo, folder), kafka_bootstrap=connection.bootstrap)
    environment = ingest_environment(ingest, folder, kinesis=False)
    return CrashDemo(ingest, sent, environment, source=stream_label(connection.topic))


def _topic_afresh(connection: KafkaConnection, partitions_count: int) -> None:
    """Delete the lesson's topic if it is there and create it again (offsets start at 0)."""
    import time

    from confluent_kafka.admin import AdminClient

    admin = AdminClient(connection.client_config())
    if connection.topic in admin.list_topics(timeout=TIMEOUT_SECONDS).topics:
        for future in admin.delete_topics([connection.topic]).values():
            future.result(TIMEOUT_SECONDS)
    deadline = time.monotonic() + MADE_AGAIN_SECONDS
    while True:  # the broker frees the name once it has deleted the topic's partitions
        try:
            ensure_topic(connection, partitions_count)
            if len(partitions(connection)) == partitions_count:
                return
        except (ConfigError, ServiceUnavailableError):  # still being deleted: tried again, bounded
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def send_records(connection: KafkaConnection, records: list[Record]) -> list[tuple[int, int]]:
    """Send ``records`` in order, each keyed by its partition key; return each one's (partition, offset).

    Raises:
        IngestError: If the broker did not take every record.
    """
    import confluent_kafka

    producer = confluent_kafka.Producer(connection.client_config(**{"enable.idempotence": True, "linger.ms": 5}))
    placed: list[tuple[int, int] | None] = [None] * len(records)
    failed: list[str] = []

    def report(index: int) -> Callable[[object, object], None]:  # confluent-kafka's delivery callback
        def delivered(error: object, message: object) -> None:
            if error is not None:
                failed.append(str(error))
            else:
                placed[index] = (message.partition(), message.offset())  # type: ignore[attr-defined]

        return delivered

    for index, record in enumerate(records):
        producer.produce(connection.topic, value=record.data, key=record.partition_key, on_delivery=report(index))
        producer.poll(0)
    producer.flush(TIMEOUT_SECONDS)
    taken = [place for place in placed if place is not None]
    if failed or len(taken) != len(records):
        raise IngestError(
            f"Kafka took {len(taken)} of {len(records)} records ({failed[0] if failed else 'no answer'}); run it again."
        )
    return taken
