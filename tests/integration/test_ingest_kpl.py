"""KPL aggregates and gzip payloads end to end: produced like a KPL producer, ingested exactly once."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from icestream.config import Settings
from icestream.errors import IngestError
from icestream.ingest.query import start_ingest
from icestream.kinesis.kpl import encode_aggregate
from tests.helpers.crash import crash_at
from tests.helpers.ingest import assert_accounted, drain
from tests.helpers.streams import event_payload, put, read_stream, send_aggregated, user_records


def test_aggregated_gzip_records_land_once_each_across_a_crash(spark, fresh, tmp_path: Path) -> None:
    settings = fresh(prefix="kpl")
    records = user_records(0, 150)
    aggregator = send_aggregated(settings, records, per_aggregate=7)
    assert aggregator.aggregates >= 20
    good = encode_aggregate([("u9", event_payload(900, "u9"))])
    broken = good[:-1] + bytes([good[-1] ^ 1])
    put(settings, [(broken, "u9"), (gzip.compress(event_payload(901, "u9"))[:-3], "u9")])

    # 25 user records per shard and batch: batches end inside aggregates of 7. The crash leaves
    # batch 2's rejects committed and its events not.
    query = start_ingest(
        spark, settings, available_now=True, trigger_seconds=0, max_records_per_shard=25, batch_retries=0,
        fault_hook=crash_at("between_commits", batch=2), progress_file=tmp_path / "p.jsonl",
    )  # fmt: skip
    with pytest.raises(IngestError, match="SimulatedCrashError"):
        query.await_termination(timeout=300)
    more = user_records(150, 30)
    send_aggregated(settings, more, per_aggregate=7)
    restarted = drain(spark, settings, max_records_per_shard=25, progress_file=tmp_path / "p.jsonl")

    rows = spark.table(settings.table_name).select("event_id", "user_id", "partition_key", "properties").collect()
    assert sorted(row.event_id for row in rows) == sorted(record.event_id for record in records + more)
    by_id = {row.event_id: row for row in rows}
    for record in records + more:
        row = by_id[record.event_id]
        assert (row.user_id, row.partition_key) == (record.partition_key, record.partition_key)
        assert row.properties["n"] == record.event_id.removeprefix("ev-")  # the payload's own field
    rejects = spark.table(settings.rejects_table_name).select("reason", "detail").collect()
    assert sorted(row.reason for row in rejects) == ["corrupt_aggregate", "corrupt_compressed"]
    assert_accounted(list(restarted.recent_progress))
    # Some committed positions ended inside an aggregate (the path this test is about).
    summaries = spark.sql(f"SELECT summary['icestream.positions'] AS p FROM {settings.table_name}.snapshots").collect()
    inside = [
        position for row in summaries if row.p for position in json.loads(row.p).values() if position.count(":") == 2
    ]
    assert inside, "no batch ended inside an aggregate"


def test_cli_sends_the_sample_file_aggregated_and_compressed(stream_settings: Settings, capsys) -> None:
    from icestream.cli import main
    from icestream.config import project_home
    from icestream.kinesis.clients import ensure_stream
    from icestream.kinesis.compression import decompress
    from icestream.kinesis.kpl import decode_aggregate, is_aggregate

    ensure_stream(stream_settings, shard_count=2)
    sample = project_home() / "data" / "samples" / "events.jsonl"
    code = main(["produce", "--stream", stream_settings.stream_name, "--from-file", str(sample), "--no-progress",
                 "--aggregate", "4", "--compress", "gzip"])  # fmt: skip
    assert code == 0
    lines = sample.read_bytes().splitlines()
    assert f"{len(lines)} user records in" in capsys.readouterr().out
    found = read_stream(stream_settings)
    assert any(is_aggregate(record["Data"]) for record in found)
    payloads = []
    for record in found:
        members = decode_aggregate(record["Data"]) if is_aggregate(record["Data"]) else None
        for data in [member.data for member in members] if members else [record["Data"]]:
            payloads.append(decompress(data, 10**6))
    assert sorted(payloads) == sorted(lines)
