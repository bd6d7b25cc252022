"""What notebook 10 teaches, against Spark and Iceberg themselves, on small tables.

- Iceberg's streaming sink skips an epoch its query already committed (a checkpoint whose
  ``commits/N`` is missing, as a process killed between the two commits leaves it), and a lost
  checkpoint writes every row again;
- a ``foreachBatch`` MERGE guarded by the batch id is harmless when Spark replays a batch, and
  counts twice without the guard;
- Spark's watermark, the windows it writes and what it drops equal the rule in
  :func:`icestream.queries.streaming.watermark_truth`.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from icestream.config import Settings
from icestream.queries import streaming

pytestmark = pytest.mark.integration

BASE = datetime(2026, 1, 1, tzinfo=UTC)


def table_name(settings: Settings, spark, prefix: str) -> str:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.namespace_name}")
    return f"{settings.namespace_name}.{prefix}_{uuid.uuid4().hex[:8]}"


def append_minutes(spark, table: str, rows: list[tuple[int, float]], session: str = "s-1") -> None:
    frame = [(f"e-{number}", session, BASE + timedelta(minutes=minute)) for number, minute in rows]
    spark.createDataFrame(frame, "event_id string, session_id string, event_ts timestamp").coalesce(1).writeTo(
        table
    ).append()


def forget_commit(checkpoint: Path, batch_id: int) -> None:
    """Leave the checkpoint a process killed between the sink's commit and Spark's commit log leaves."""
    commit = checkpoint / "commits" / str(batch_id)
    commit.unlink()
    commit.with_name(f".{batch_id}.crc").unlink(missing_ok=True)


def run_available_now(writer) -> None:
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()


@pytest.fixture
def source(spark, settings: Settings) -> str:
    name = table_name(settings, spark, "ss_source")
    spark.sql(f"CREATE TABLE {name} (event_id STRING, session_id STRING, event_ts TIMESTAMP) USING iceberg")
    for commit in range(3):
        append_minutes(spark, name, [(commit * 10 + number, commit * 10 + number) for number in range(10)])
    return name


def test_the_sink_skips_a_committed_epoch_and_a_lost_checkpoint_writes_again(
    spark, settings: Settings, source: str, tmp_path: Path
) -> None:
    copy = table_name(settings, spark, "ss_copy")
    spark.sql(f"CREATE TABLE {copy} (event_id STRING, session_id STRING, event_ts TIMESTAMP) USING iceberg")

    def copy_once(checkpoint: Path) -> None:
        stream = spark.readStream.format("iceberg").load(source)
        writer = stream.writeStream.format("iceberg").option("checkpointLocation", str(checkpoint))
        writer.trigger(availableNow=True).toTable(copy).awaitTermination()
        spark.catalog.refreshTable(copy)  # the sink committed from the query's own session

    def streaming_commits() -> pd.DataFrame:
        return spark.sql(
            f"""SELECT summary['spark.sql.streaming.queryId'] AS query_id,
                   summary['spark.sql.streaming.epochId'] AS epoch
            FROM {copy}.snapshots WHERE summary['spark.sql.streaming.queryId'] IS NOT NULL"""
        ).toPandas()

    checkpoint = tmp_path / "copy"
    copy_once(checkpoint)
    assert spark.table(copy).count() == 30
    first = streaming_commits()
    batches = streaming.checkpoint_files(checkpoint)
    assert batches["commits"].all()

    last = int(batches["batch_id"].max())
    forget_commit(checkpoint, last)
    copy_once(checkpoint)
    assert spark.table(copy).count() == 30, "the replayed epoch was skipped"
    assert streaming_commits().equals(first), "no new snapshot for the epoch already committed"
    assert streaming.checkpoint_files(checkpoint)["commits"].all(), "Spark committed the replayed batch"

    copy_once(tmp_path / "lost")
    rows = spark.sql(f"SELECT count(*) AS n, count(DISTINCT event_id) AS ids FROM {copy}").first()
    assert (rows.n, rows.ids) == (60, 30), "a new checkpoint is a new query: every row again"
    assert streaming_commits()["query_id"].nunique() == 2


@pytest.mark.parametrize("guarded", [True, False], ids=["guarded", "unguarded"])
def test_a_replayed_foreach_batch_merge_counts_once_only_with_the_guard(
    spark, settings: Settings, source: str, tmp_path: Path, guarded: bool
) -> None:
    from pyspark.sql import functions as sf

    sessions = table_name(settings, spark, "ss_sessions")
    spark.sql(f"CREATE TABLE {sessions} (session_id STRING, events BIGINT, last_batch_id BIGINT) USING iceberg")
    guard = "AND t.last_batch_id < s.last_batch_id" if guarded else ""

    def upsert(batch, batch_id: int) -> None:
        per_session = (
            batch.groupBy("session_id")
            .agg(sf.count("*").alias("events"))
            .withColumn("last_batch_id", sf.lit(batch_id))
            .localCheckpoint()
        )
        per_session.createOrReplaceTempView("session_batch")
        per_session.sparkSession.sql(
            f"""MERGE INTO {sessions} AS t USING session_batch AS s ON t.session_id = s.session_id
            WHEN MATCHED {guard} THEN UPDATE SET t.events = t.events + s.events, t.last_batch_id = s.last_batch_id
            WHEN NOT MATCHED THEN INSERT *"""
        )

    def run(checkpoint: Path) -> int:
        stream = spark.readStream.format("iceberg").load(source)
        run_available_now(stream.writeStream.foreachBatch(upsert).option("checkpointLocation", str(checkpoint)))
        spark.catalog.refreshTable(sessions)
        return spark.table(sessions).agg(sf.sum("events")).first()[0]

    checkpoint = tmp_path / "sessions"
    assert run(checkpoint) == 30
    append_minutes(spark, source, [(100 + number, 40) for number in range(5)])  # a second batch of 5
    assert run(checkpoint) == 35
    forget_commit(checkpoint, int(streaming.checkpoint_files(checkpoint)["batch_id"].max()))
    assert run(checkpoint) == (35 if guarded else 40), "Spark replayed the last batch with the same id and rows"


def test_spark_s_watermark_drops_and_writes_what_the_rule_says(spark, settings: Settings, tmp_path: Path) -> None:
    from pyspark.sql import functions as sf

    arrivals = table_name(settings, spark, "ss_arrivals")
    windows = table_name(settings, spark, "ss_windows")
    spark.sql(f"CREATE TABLE {arrivals} (event_id STRING, session_id STRING, event_ts TIMESTAMP) USING iceberg")
    spark.sql(f"CREATE TABLE {windows} (window_start TIMESTAMP, event_type STRING, events BIGINT) USING iceberg")
    polls = [[0, 9, 4], [20, 12, 3, 19], [14, 16, 9.9, 10.1, 31], [26, 18, 33]]  # event minutes, in arrival order
    counted = (
        spark.readStream.format("iceberg")
        .load(arrivals)
        .withWatermark("event_ts", "5 minutes")
        .groupBy(sf.window("event_ts", "5 minutes"), sf.lit("click").alias("event_type"))
        .count()
        .select(sf.col("window.start").alias("window_start"), "event_type", sf.col("count").alias("events"))
    )
    progress = []
    number = 0
    for poll in polls:
        append_minutes(spark, arrivals, [(number + offset, minute) for offset, minute in enumerate(poll)])
        number += len(poll)
        query = (
            counted.writeStream.format("iceberg")
            .outputMode("append")
            .option("checkpointLocation", str(tmp_path / "windows"))
            .trigger(availableNow=True)
            .toTable(windows)
        )
        query.awaitTermination()
        progress += query.recentProgress

    rows = pd.DataFrame(
        [(batch, BASE + timedelta(minutes=minute)) for batch, poll in enumerate(polls) for minute in poll],
        columns=["batch", "event_ts"],
    ).assign(event_type="click")
    truth = streaming.watermark_truth(rows, delay=pd.Timedelta(minutes=5), window=pd.Timedelta(minutes=5))
    table = streaming.progress_table(progress)
    reading = table[table["input_rows"] > 0]
    assert reading["input_rows"].tolist() == [len(poll) for poll in polls], "one micro-batch per commit"
    assert reading["watermark"].iloc[1:].tolist() == truth.watermarks.iloc[1:].tolist()
    assert table["watermark"].dropna().iloc[-1] == truth.final_watermark
    assert len(truth.dropped) > 0, "the polls are chosen so that the watermark drops events"
    spark.catalog.refreshTable(windows)
    compared = streaming.windows_compared(spark.table(windows).toPandas(), truth)
    assert (compared["written"] == compared["rule"]).all(), compared


def test_a_stream_of_commits_that_added_no_file_reads_nothing_and_available_now_fails_on_iceberg_1_12(
    spark, settings, tmp_path: Path
) -> None:
    """Why notebook 10 reads the events table with processAllAvailable() rather than availableNow.

    09's expiry can leave the events table whose kept commits added no file (a position-only
    commit of the ingest, then compactions). Iceberg returns a null "latest offset" for "nothing
    new"; from Iceberg 1.11 on, its ``prepareForTriggerAvailableNow`` dereferences it and the query
    fails at its start. The default trigger with ``processAllAvailable()`` reads nothing and stops.
    """
    from pyspark.errors import StreamingQueryException

    from icestream.stack import spark_line

    table = table_name(settings, spark, "nofile")
    spark.sql(f"CREATE TABLE {table} (event_id STRING) USING iceberg")
    spark.sql(f"INSERT INTO {table} SELECT 'x' WHERE false")  # an append snapshot that adds no file
    assert spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").first().n == 1
    try:
        looked = spark.readStream.format("iceberg").load(table).writeStream.format("memory").queryName("nofile_look")
        query = looked.option("checkpointLocation", str(tmp_path / "look")).start()
        query.processAllAvailable()
        query.stop()
        assert spark.table("nofile_look").count() == 0
        if tuple(int(part) for part in spark_line(settings.spark_line).iceberg.split(".")[:2]) >= (1, 11):
            scheduled = spark.readStream.format("iceberg").load(table).writeStream.format("memory")
            scheduled = scheduled.queryName("nofile_scheduled").option("checkpointLocation", str(tmp_path / "now"))
            with pytest.raises(StreamingQueryException, match="lastOffsetForTriggerAvailableNow"):
                scheduled.trigger(availableNow=True).start().awaitTermination()
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
