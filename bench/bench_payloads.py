"""The read task's per-record cost by payload form: plain JSON, gzip, KPL aggregates, both.

The same generated events are put into an in-memory shard (a fake Kinesis client answering
GetRecords from a list: no emulator, no Spark, no network) in four forms, and the shard reader
(:func:`icestream.ingest.reading.shard_reader.read_shard`: expansion, decompression, parsing, dedupe digests)
drains each. Plain JSON is the baseline of the same run; the others are reported as events per
second and their ratio to it. CPU-bound and single-threaded, so it is a fair per-core figure.

Run: ``.venv/bin/python bench/bench_payloads.py [--events 20000] [--runs 5] [--per-aggregate 100]``
(about 30 seconds).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, command_line, shown, summary, write_results

from icestream.ingest.positions import TRIM_HORIZON
from icestream.ingest.reading.shard_plan import ShardPlan
from icestream.ingest.reading.shard_reader import ReadOptions, read_shard
from icestream.kinesis.clients import KinesisConnection


class MemoryShard:
    """One shard's records in memory, answering GetShardIterator and GetRecords like Kinesis."""

    def __init__(self, payloads: list[tuple[bytes, str]]) -> None:
        arrival = datetime.now(UTC)
        self.records = [
            {"SequenceNumber": str(10**20 + index), "Data": data, "PartitionKey": key,
             "ApproximateArrivalTimestamp": arrival}
            for index, (data, key) in enumerate(payloads)
        ]  # fmt: skip

    def get_shard_iterator(self, **_: Any) -> dict[str, str]:
        return {"ShardIterator": "0"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803 - boto3's names
        start = int(ShardIterator)
        page = self.records[start : start + Limit]
        end = start + len(page)
        behind = 0 if end >= len(self.records) else 1
        return {"Records": page, "NextShardIterator": str(end), "MillisBehindLatest": behind}


def drain(shard: MemoryShard, events: int) -> int:
    options = ReadOptions(
        connection=KinesisConnection("local", "us-east-1", "http://127.0.0.1:1"), stream_name="bench",
        max_records=events, min_call_interval=0.0, max_calls=10**6,
    )  # fmt: skip
    plan = ShardPlan("shardId-000000000000", TRIM_HORIZON, False, None, None)
    return sum(row[0] == "event" for row in read_shard(plan, options, shard, lambda _: None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--per-aggregate", type=int, default=100)
    args = parser.parse_args()
    from icestream.producer.aggregate import Aggregator
    from icestream.synthetic.generator import backfill_config, generate

    facts = banner("read-task cost by payload form", command_line())
    config = backfill_config(records=args.events, seed=11, bad_rate=0.0, duplicate_rate=0.0, late_rate=0.0)
    records = [record for record in generate(config)[0] if record.kind == "event"]
    forms = {
        "plain": Aggregator(),
        "gzip": Aggregator(compression="gzip"),
        f"kpl x{args.per_aggregate}": Aggregator(args.per_aggregate),
        f"kpl x{args.per_aggregate} + gzip": Aggregator(args.per_aggregate, compression="gzip"),
    }
    shards = {
        name: MemoryShard([(item.data, item.partition_key) for item in aggregator.records(records)])
        for name, aggregator in forms.items()
    }
    rates: dict[str, list[float]] = {name: [] for name in shards}
    for _ in range(args.runs):  # interleaved, so drift in the machine's load hits every form alike
        for name, shard in shards.items():
            began = time.perf_counter()
            written = drain(shard, len(records))
            rates[name].append(written / (time.perf_counter() - began))
            assert written == len(records), (name, written)
    results = {name: summary(values) for name, values in rates.items()}
    baseline = results["plain"]["median"]
    for name, stats in results.items():
        print(f"{name:>18}: {shown(stats, ' events/s', 0)}; x{stats['median'] / baseline:.2f} of plain")
    write_results("payloads", {"machine": facts, "events": len(records), "per_aggregate": args.per_aggregate,
                               "events_per_second": results,
                               "ratio_to_plain": {k: v["median"] / baseline for k, v in results.items()}})  # fmt: skip


if __name__ == "__main__":
    main()
