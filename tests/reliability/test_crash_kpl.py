"""SIGKILL inside a KPL aggregate: positions with sub-sequence numbers lose and duplicate nothing.

One shard holds gzip-compressed user records in aggregates of 9 (every tenth user record malformed,
so the rejects table commits too). The ingest process reads 5 user records per batch, so every
batch ends inside an aggregate, and is SIGKILLed twice: between the rejects commit and the events
commit of its first batch (the rejects table's position is then inside an aggregate, the events
table's nowhere), then right after its first batch committed (the next one would start inside an
aggregate, with the tables' replay thresholds inside it). A final drain must leave every event and
every reject exactly once.
"""

from __future__ import annotations

import gzip
import json
import signal
import time
from collections import Counter
from pathlib import Path

from icestream.kinesis.clients import kinesis_client, list_shards
from icestream.producer.aggregate import Aggregator, open_shard_starts
from icestream.producer.put import produce
from icestream.synthetic.wire import Record
from tests.helpers.ingest import drain, refresh_tables
from tests.reliability import figures
from tests.reliability.ingest_runner import sigkill_trial

USER_RECORDS = 90
PER_AGGREGATE = 9


def _payload(number: int) -> bytes:
    if number % 10 == 3:
        return f'{{"broken": {number}'.encode()  # invalid JSON: a reject inside an aggregate
    return json.dumps({"event_id": f"k-{number}", "user_id": f"u{number % 4}", "event_type": "click",
                       "event_ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode()  # fmt: skip


def _positions(spark, table: str) -> list[str]:
    rows = spark.sql(f"SELECT summary['icestream.positions'] AS p FROM {table}.snapshots").collect()
    return [position for row in rows if row.p for position in json.loads(row.p).values()]


def test_sigkill_inside_an_aggregate_loses_and_duplicates_nothing(spark, fresh, tmp_path: Path, monkeypatch) -> None:
    settings = fresh(shards=1, prefix="kplcrash")
    records = [
        Record(data=_payload(number), partition_key=f"u{number % 4}", kind="event", event_ts=0.0, send_at=0.0)
        for number in range(USER_RECORDS)
    ]
    shards = open_shard_starts(list_shards(kinesis_client(settings), settings.stream_name))
    aggregator = Aggregator(PER_AGGREGATE, compression="gzip", shard_starts=shards)
    assert produce(settings, aggregator.records(records), progress=False).sent == USER_RECORDS // PER_AGGREGATE

    monkeypatch.setenv("RELIABILITY_MAX_RECORDS", "5")  # 5 user records per batch: cuts inside every aggregate
    for number, phase in enumerate(("between_commits", "after_commit")):
        code, last = sigkill_trial(settings, tmp_path, number, phase, 1, delay=240.0)
        log_tail = (tmp_path / f"trial-{number:02d}.log").read_text(errors="replace")[-2000:]
        assert code == -signal.SIGKILL, f"trial {number} ended with {code}, not SIGKILL:\n{log_tail}"
        assert last == phase
    refresh_tables(spark, settings)  # the killed processes committed
    inside = [
        position
        for table in (settings.table_name, settings.rejects_table_name)
        for position in _positions(spark, table)
        if position.count(":") == 2
    ]
    assert inside, "no committed position inside an aggregate: the test would not test what it says"

    drain(spark, settings, progress_file=tmp_path / "p.jsonl")

    events = Counter(row.event_id for row in spark.table(settings.table_name).select("event_id").collect())
    rejects = Counter(bytes(row.raw_data) for row in spark.table(settings.rejects_table_name).collect())
    expected_events = {f"k-{number}" for number in range(USER_RECORDS) if number % 10 != 3}
    expected_rejects = {gzip.compress(_payload(n), mtime=0) for n in range(USER_RECORDS) if n % 10 == 3}
    figures.record(
        "crash inside KPL aggregates", "SIGKILL x2, 5 user records per batch", events=sum(events.values()),
        lost=len(expected_events - set(events)), duplicated=sum(count - 1 for count in events.values()),
        rejects=sum(rejects.values()), positions_inside_aggregates=len(inside),
    )  # fmt: skip
    assert set(events) == expected_events, "nothing lost, nothing extra"
    assert max(events.values()) == 1, "nothing duplicated"
    assert set(rejects) == expected_rejects
    assert max(rejects.values()) == 1
