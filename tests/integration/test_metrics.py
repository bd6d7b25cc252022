"""real_time_metrics kept by the ingest (lake.metrics_table) against the emulator: equal to the truth computed in Python
and to the full query, read by DuckDB, across crashes, compaction, a delete and a second refresher."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from icestream.cli import main as cli_main
from icestream.config import Settings, load_settings
from icestream.errors import IngestError
from icestream.ingest.lease import Lease
from icestream.kinesis.clients import ensure_stream
from icestream.lake.continuous_aggregate import (
    METRICS_HOLDER,
    SOURCE_SNAPSHOT_KEY,
    create_metrics_view,
    read_mark,
    refresh_metrics,
)
from icestream.lake.table import LakeTable, setup_tables
from icestream.synthetic.generator import backfill_config, generate
from tests.helpers.crash import crash_at
from tests.helpers.ingest import drain, refresh_tables
from tests.helpers.metrics import duckdb_full_query, duckdb_metrics, truth
from tests.helpers.streams import put

END = datetime(2026, 11, 21, tzinfo=UTC)


def metrics_settings(spark, prefix: str) -> Settings:
    suffix = uuid.uuid4().hex[:8]
    settings = load_settings(stream_name=f"{prefix}-{suffix}", table=f"{prefix}_{suffix}")
    ensure_stream(settings, shard_count=2)
    setup_tables(spark, settings)
    return settings


def records(count: int, seed: int) -> list:
    """Generated records with repeats, late events and malformed ones, in send order."""
    generated, _ = generate(backfill_config(hours=1, count=count, end=END, seed=seed, late_rate=0.05))
    return generated


def sent(settings: Settings, part: list) -> None:
    put(settings, [(record.data, record.partition_key) for record in part])


def expected(part: list) -> dict:
    return truth(record.data for record in part if record.kind == "event")


def current_source(spark, settings: Settings) -> int | None:
    refresh_tables(spark, settings, settings.metrics_table_name)
    return read_mark(spark, settings.metrics_table_name).source_snapshot


def test_the_ingest_keeps_the_metrics_equal_to_the_truth_and_the_full_query(spark, emulator) -> None:
    settings = metrics_settings(spark, "metrics")
    stream = records(1500, seed=4)
    third = len(stream) // 3
    for part in (stream[:third], stream[third : 2 * third], stream[2 * third :]):
        sent(settings, part)
        query = drain(spark, settings, metrics=True)
        assert all(batch["metrics_snapshot_id"] for batch in query.recent_progress), "each batch refreshed them"
    refresh_tables(spark, settings, settings.metrics_table_name)
    events = LakeTable(spark, settings.table_name)
    metrics = duckdb_metrics(LakeTable(spark, settings.metrics_table_name))
    assert metrics == expected(stream)
    assert metrics == duckdb_full_query(events)
    assert any(record.late for record in stream)
    assert any(record.kind == "duplicate" for record in stream)
    # Every metrics commit names the events snapshot it folded in: the last one is the events table's current one.
    assert current_source(spark, settings) == events.inspect.metadata_location()[1]


@pytest.mark.parametrize("phase", ["between_commits", "after_commit", "before_metrics"])
def test_a_crash_before_the_metrics_commit_leaves_them_behind_then_caught_up(spark, emulator, phase: str) -> None:
    settings = metrics_settings(spark, "metricscrash")
    stream = records(800, seed=6)
    half = len(stream) // 2
    sent(settings, stream[:half])
    drain(spark, settings, metrics=True)
    behind = current_source(spark, settings)
    sent(settings, stream[half:])
    with pytest.raises(IngestError, match="SimulatedCrashError"):
        drain(spark, settings, metrics=True, fault_hook=crash_at(phase), batch_retries=0)
    assert current_source(spark, settings) == behind, "the crash came before the metrics' commit"
    drain(spark, settings, metrics=True)
    refresh_tables(spark, settings, settings.metrics_table_name)
    assert duckdb_metrics(LakeTable(spark, settings.metrics_table_name)) == expected(stream)


def test_compaction_is_folded_past_and_a_delete_makes_it_rebuild(spark, emulator) -> None:
    settings = metrics_settings(spark, "metricsfold")
    stream = records(900, seed=8)
    half = len(stream) // 2
    for part in (stream[: half // 2], stream[half // 2 : half]):
        sent(settings, part)
        drain(spark, settings, metrics=True)
    spark.sql(f"CALL lake.system.rewrite_data_files(table => '{settings.table_name}', "
              "options => map('rewrite-all', 'true'))").collect()  # fmt: skip
    sent(settings, stream[half:])
    drain(spark, settings, metrics=True)
    refresh_tables(spark, settings, settings.metrics_table_name)
    operations = [row[0] for row in spark.sql(f"SELECT operation FROM {settings.table_name}.snapshots").collect()]
    assert "replace" in operations
    metrics = LakeTable(spark, settings.metrics_table_name)
    assert duckdb_metrics(metrics) == expected(stream)

    spark.sql(f"DELETE FROM {settings.table_name} WHERE event_type = 'login'")
    refresh = refresh_metrics(spark, settings.table_name, settings.metrics_table_name)
    assert refresh.mode == "rebuild"
    assert "delete" in refresh.reason or "overwrite" in refresh.reason
    # Its counts come from the snapshots' summaries: the events it read and the groups it wrote.
    assert refresh.events == spark.table(settings.table_name).count()
    assert refresh.groups == spark.table(settings.metrics_table_name).count()
    refresh_tables(spark, settings, settings.metrics_table_name)
    after = duckdb_metrics(metrics)
    assert after == {group: answer for group, answer in expected(stream).items() if group[1] != "login"}
    assert after == duckdb_full_query(LakeTable(spark, settings.table_name))
    assert refresh_metrics(spark, settings.table_name, settings.metrics_table_name).mode == "current"


def test_a_second_refresher_is_refused_and_the_view_reads_the_table(spark, emulator, capsys) -> None:
    settings = metrics_settings(spark, "metricslease")
    sent(settings, records(300, seed=2))
    drain(spark, settings, metrics=True)
    holder = Lease(spark, settings.metrics_table_name, holder=METRICS_HOLDER)
    holder.acquire()
    try:
        # The command's own session: a second refresher, as a cron job beside the ingest would be.
        args = ["metrics", "--table", settings.table, "--view", f"rtm_{settings.table}"]
        assert cli_main(args) == 2
        assert "is already being refreshed" in capsys.readouterr().err
    finally:
        holder.release()
    assert cli_main(args) == 0
    printed = capsys.readouterr().out
    assert "metrics current with events snapshot" in printed
    assert "view lake.streaming_analytics.rtm_" in printed
    view = create_metrics_view(spark, settings.metrics_table_name, f"lake.{settings.namespace}.rtm_{settings.table}")
    assert view is not None
    listed = {row.viewName for row in spark.sql(f"SHOW VIEWS IN lake.{settings.namespace}").collect()}
    assert f"rtm_{settings.table}" in listed, "an Iceberg view in the catalog, not a session's temporary view"
    through_view = spark.sql(f"SELECT sum(events), sum(unique_users) FROM {view}").first()
    table = spark.sql(f"SELECT sum(events), sum(unique_users) FROM {settings.metrics_table_name}").first()
    assert tuple(through_view) == tuple(table)
    assert table[0] > 0
    summaries = spark.sql(f"SELECT summary FROM {settings.metrics_table_name}.snapshots").collect()
    assert all(SOURCE_SNAPSHOT_KEY in row.summary for row in summaries)


def test_icestream_maintain_on_the_metrics_table_keeps_its_mark_so_refreshes_fold_on(spark, emulator) -> None:
    settings = metrics_settings(spark, "metricsmaint")
    stream = records(900, seed=12)
    half = len(stream) // 2
    for part in (stream[: half // 2], stream[half // 2 : half]):
        sent(settings, part)
        drain(spark, settings, metrics=True)
    metrics = settings.metrics_table_name
    refresh_tables(spark, settings, metrics)
    assert spark.sql(f"SELECT count(*) FROM {metrics}.delete_files").first()[0] > 0, "merge-on-read refreshes"
    # Every step; expiry keeps the newest snapshot that carries the refresh's mark, as it keeps positions.
    arguments = ["maintain", "--table", f"{settings.table}_metrics", "--expire-older-than", "0s",
                 "--steps", "compact,manifests,expire"]  # fmt: skip
    assert cli_main(arguments) == 0
    refresh_tables(spark, settings, metrics)
    assert spark.sql(f"SELECT count(*) FROM {metrics}.delete_files").first()[0] == 0
    assert read_mark(spark, metrics).source_snapshot is not None, "the mark outlived the expiry"
    sent(settings, stream[half:])
    query = drain(spark, settings)  # without --metrics: the scheduled form refreshes them afterwards
    refresh = refresh_metrics(spark, settings.table_name, metrics)
    assert refresh.mode == "fold", refresh.describe()
    assert refresh.events == sum(batch["written"] for batch in query.recent_progress)
    refresh_tables(spark, settings, metrics)
    assert duckdb_metrics(LakeTable(spark, metrics)) == expected(stream)
