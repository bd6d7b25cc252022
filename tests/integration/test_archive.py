"""The raw archive: every record as received, once, committed with the batch's positions; its retention."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from icestream.cli import main
from icestream.config import Settings
from icestream.errors import IngestError
from icestream.lake.archive import expire_archive
from icestream.lake.ddl import create_archive_table
from tests.helpers.crash import crash_at
from tests.helpers.ingest import drain
from tests.helpers.streams import mixed_records, put, read_stream, send_aggregated, user_records


def archived(spark, settings: Settings) -> Counter:
    rows = spark.table(settings.archive_table_name).select("shard_id", "sequence_number").collect()
    return Counter((row.shard_id, row.sequence_number) for row in rows)


def test_every_record_read_is_archived_once_as_received(spark, fresh) -> None:
    settings = fresh(shards=2, prefix="arc", archive_raw=True)
    records, good, malformed = mixed_records(0, 120)
    placed = put(settings, records)
    query = drain(spark, settings, max_records_per_shard=50)

    assert archived(spark, settings) == Counter(placed)
    progress = list(query.recent_progress)
    assert len(progress) >= 2, "several batches, so positions carry the archive from one to the next"
    assert sum(batch["written"] + batch["rejected"] + batch["deduplicated"] for batch in progress) == len(placed)
    assert spark.table(settings.table_name).count() == len(good)
    assert spark.table(settings.rejects_table_name).count() == malformed
    by_place = {
        (row.shard_id, row.sequence_number): (bytes(row.data), row.partition_key, row.arrival_ts, row.batch_id)
        for row in spark.table(settings.archive_table_name).collect()
    }
    assert [by_place[place][:2] for place in placed] == [(data, key) for data, key in records]
    assert all(arrival is not None and batch is not None for _, _, arrival, batch in by_place.values())
    partitions = spark.sql(f"SELECT partition FROM {settings.archive_table_name}.partitions").collect()
    assert {row.partition.arrival_ts_day for row in partitions} == {datetime.now(UTC).date()}


@pytest.mark.parametrize("phase", ["after_archive", "between_commits"])
def test_the_archive_stays_exact_across_a_crash(spark, fresh, phase: str) -> None:
    settings = fresh(shards=2, prefix="arc", archive_raw=True)
    records, good, _ = mixed_records(0, 80)
    placed = put(settings, records)

    with pytest.raises(IngestError, match="SimulatedCrashError"):
        drain(spark, settings, max_records_per_shard=30, fault_hook=crash_at(phase, batch=1), batch_retries=0)
    more, more_good, _ = mixed_records(1000, 20)
    placed += put(settings, more)
    drain(spark, settings, max_records_per_shard=30)

    assert archived(spark, settings) == Counter(placed)
    events = Counter(row.event_id for row in spark.table(settings.table_name).select("event_id").collect())
    assert set(events) == good | more_good
    assert max(events.values()) == 1


def test_without_the_archive_no_archive_table_is_written(spark, fresh, monkeypatch) -> None:
    settings = fresh(shards=1, prefix="arc")
    records, good, _ = mixed_records(0, 10)
    put(settings, records)
    drain(spark, settings)
    assert spark.table(settings.table_name).count() == len(good)
    assert not spark.catalog.tableExists(settings.archive_table_name)

    # From the command line, --archive creates and fills it from where the ingest is.
    more, _, _ = mixed_records(100, 10)
    placed = put(settings, more)
    monkeypatch.setenv("ICESTREAM_STREAM_NAME", settings.stream_name)
    monkeypatch.setenv("ICESTREAM_TABLE", settings.table)
    assert main(["ingest", "--available-now", "--trigger", "0s", "--quiet", "--archive"]) == 0
    assert archived(spark, settings) == Counter(placed)


def archive_week(spark, name: str, now: datetime) -> list[datetime]:
    """Two archived records a day for the 7 days before ``now``, one commit per day (history to expire)."""
    from pyspark.sql import functions as F  # noqa: N812

    arrivals = [now - timedelta(days=days, hours=hours) for days in range(7) for hours in (0, 10)]
    rows = [(b"x", "shardId-000000000000", str(index), "k", arrival, now, 0) for index, arrival in enumerate(arrivals)]
    frame = spark.createDataFrame(rows, spark.table(name).schema)
    for day in range(7):
        frame.where(F.col("arrival_ts") >= F.lit(now - timedelta(days=day + 1))).where(
            F.col("arrival_ts") < F.lit(now - timedelta(days=day)) if day else F.lit(True)
        ).writeTo(name).append()
    assert spark.table(name).count() == len(arrivals)
    return arrivals


def test_expire_archive_drops_whole_days_past_retention(spark, fresh) -> None:
    settings = dataclasses.replace(fresh(shards=1, prefix="arc"), archive_retention_days=3)
    missing = expire_archive(spark, settings)
    assert (missing.deleted_rows, missing.expired) == (0, None), "no archive: nothing to do"

    name = create_archive_table(spark, settings)
    now = datetime(2026, 11, 23, 15, 0, tzinfo=UTC)
    arrivals = archive_week(spark, name, now)

    result = expire_archive(spark, settings, now=now)
    assert result.cutoff == datetime(2026, 11, 20, tzinfo=UTC)
    kept = sorted(row.arrival_ts.timestamp() for row in spark.table(name).collect())  # naive local, as collected
    expected = sorted(arrival.timestamp() for arrival in arrivals if arrival >= result.cutoff)
    assert kept == expected
    assert result.deleted_rows == len(arrivals) - len(expected)
    assert spark.sql(f"SELECT count(*) FROM {name}.snapshots").first()[0] == 1
    assert expire_archive(spark, settings, now=now).deleted_rows == 0


def test_maintain_applies_the_archive_retention(spark, fresh, monkeypatch, capsys) -> None:
    settings = fresh(shards=1, prefix="arc")
    monkeypatch.setenv("ICESTREAM_STREAM_NAME", settings.stream_name)
    monkeypatch.setenv("ICESTREAM_TABLE", settings.table)
    assert main(["maintain", "--steps", "archive"]) == 0
    assert "no raw archive table" in capsys.readouterr().out

    name = create_archive_table(spark, settings)
    now = datetime.now(UTC)
    arrivals = archive_week(spark, name, now)
    cutoff = datetime.combine((now - timedelta(days=3)).date(), datetime.min.time(), UTC)
    old = sum(arrival < cutoff for arrival in arrivals)
    assert 0 < old < len(arrivals)

    assert main(["maintain", "--steps", "archive", "--archive-retention-days", "3", "--dry-run"]) == 0
    assert f"{old} rows arrived before {cutoff:%Y-%m-%d} would be deleted" in capsys.readouterr().out
    assert spark.table(name).count() == len(arrivals)

    # The default steps: the events table's, then the archive's.
    assert main(["maintain", "--archive-retention-days", "3"]) == 0
    printed = capsys.readouterr().out
    assert [line.split()[0] for line in printed.splitlines() if line.split()[0] in ("expire", "archive")] == [
        "expire", "archive",
    ]  # fmt: skip
    assert f"rows deleted {old} (arrived before {cutoff:%Y-%m-%d})" in printed
    assert spark.table(name).count() == len(arrivals) - old

    assert main(["maintain", "--steps", "archive,vacuum"]) == 2
    assert "choose from compact, manifests, expire, orphans, archive" in capsys.readouterr().err


def test_a_kpl_aggregate_is_archived_once_even_when_batches_end_inside_it(spark, fresh) -> None:
    settings = fresh(shards=2, prefix="arc", archive_raw=True)
    records = user_records(0, 120)
    send_aggregated(settings, records, per_aggregate=7)

    # 25 user records per shard and batch: batches end inside aggregates of 7.
    with pytest.raises(IngestError, match="SimulatedCrashError"):
        drain(spark, settings, max_records_per_shard=25, fault_hook=crash_at("between_commits", batch=2),
              batch_retries=0)  # fmt: skip
    drain(spark, settings, max_records_per_shard=25)

    sent = read_stream(settings)
    assert archived(spark, settings) == Counter((record["shard"], record["SequenceNumber"]) for record in sent)
    data = sorted(bytes(row.data) for row in spark.table(settings.archive_table_name).select("data").collect())
    assert data == sorted(bytes(record["Data"]) for record in sent)
    events = Counter(row.event_id for row in spark.table(settings.table_name).select("event_id").collect())
    assert set(events) == {record.event_id for record in records}
    assert max(events.values()) == 1
