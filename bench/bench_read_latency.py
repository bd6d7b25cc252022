"""One read task of many shards against a Kinesis that answers after a network round trip: its shards
read in turn against side by side.

The emulator answers from this machine in well under a millisecond of network; Kinesis answers
GetRecords and GetShardIterator after a round trip of tens of milliseconds. A read task that reads
its shards one after another waits that long per call and shard; read side by side
(``ReadOptions.shard_threads``, :mod:`icestream.ingest.reading.threads`) the waits overlap. This runs the
read task's own function (``icestream.ingest.reading.task_function.read_arrow``, in this process, without Spark)
over ``--shards`` shards against a stand-in client that sleeps ``--latency`` seconds per call and
answers generated events (``--records`` per shard, at most 100 per answer, so each shard takes
several calls). Each thread count is run ``--runs`` times, alternating with the others; the
baseline (1 thread: in turn, as before) is measured in the same run.

What it does not show: Kinesis's own service time, the network's bandwidth, or the CPU of parsing
real answers (the records are Python values here): the wall time it reports is the waiting, which is
what reading side by side removes.

Run: ``.venv/bin/python bench/bench_read_latency.py`` (32 shards, 30 ms, 3 runs: about a minute).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, command_line, shown, summary, write_results

from icestream.ingest.reading import shard_reader as reader
from icestream.ingest.reading import task_function as read_task
from icestream.ingest.reading.shard_plan import ShardPlan
from icestream.kinesis.clients import KinesisConnection
from icestream.synthetic.generator import backfill_config, generate

PER_ANSWER = 100


class DistantKinesis:
    """GetShardIterator / GetRecords over generated events, each call answered after ``latency`` seconds."""

    def __init__(self, payloads: list[bytes], per_shard: int, latency: float) -> None:
        self.payloads, self.per_shard, self.latency = payloads, per_shard, latency
        self.calls = 0

    def get_shard_iterator(self, StreamName: str, ShardId: str, ShardIteratorType: str, **where: Any) -> dict:  # noqa: N803
        self.calls += 1
        time.sleep(self.latency)
        return {"ShardIterator": f"{ShardId}|0"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict:  # noqa: N803
        self.calls += 1
        time.sleep(self.latency)
        shard_id, _, start = ShardIterator.partition("|")
        number, begin = int(shard_id.rsplit("-", 1)[1]), int(start)
        end = min(self.per_shard, begin + min(Limit, PER_ANSWER))
        arrival = datetime(2026, 11, 27, tzinfo=UTC)
        records = [
            {"SequenceNumber": str(10**20 + number * self.per_shard + index), "PartitionKey": f"key-{index % 17}",
             "Data": self.payloads[(number * self.per_shard + index) % len(self.payloads)],
             "ApproximateArrivalTimestamp": arrival}
            for index in range(begin, end)
        ]  # fmt: skip
        behind = 0 if end >= self.per_shard else 1000
        return {"Records": records, "NextShardIterator": f"{shard_id}|{end}", "MillisBehindLatest": behind}


def read_once(plans: tuple[ShardPlan, ...], client: DistantKinesis, threads: int, per_shard: int) -> dict[str, float]:
    """One read task over ``plans``: its wall and CPU seconds and the rows it handed over."""
    import pyarrow as pa

    connection = KinesisConnection("local", "us-east-1", "http://127.0.0.1:1")
    options = reader.ReadOptions(connection, "bench", max_records=per_shard, shard_threads=threads)
    reader._CLIENTS[(connection, options.read_timeout)] = client
    ids = pa.record_batch([pa.array(range(len(plans)), pa.int64())], names=["id"])
    began, cpu = time.perf_counter(), time.process_time()
    rows = sum(batch.num_rows for batch in read_task.read_arrow(options, plans)([ids]))
    return {"seconds": time.perf_counter() - began, "cpu": time.process_time() - cpu, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=32, help="shards of the one read task")
    parser.add_argument("--records", type=int, default=500, help="per shard")
    parser.add_argument("--latency", type=float, default=0.03, help="seconds per call (Kinesis's round trip)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4, 8], help="the first is the baseline")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    facts = banner("a read task's shards in turn against side by side, with a network round trip", command_line())
    generated, _ = generate(backfill_config(hours=3, count=args.shards * args.records, seed=7))
    payloads = [record.data for record in generated]
    plans = tuple(ShardPlan(f"shardId-{n:012d}", "TRIM_HORIZON", False, None, None) for n in range(args.shards))
    runs: dict[int, list[dict[str, float]]] = {threads: [] for threads in args.threads}
    for number in range(args.runs):
        for threads in args.threads if number % 2 == 0 else list(reversed(args.threads)):
            client = DistantKinesis(payloads, args.records, args.latency)
            measured = read_once(plans, client, threads, args.records) | {"calls": client.calls}
            runs[threads].append(measured)
            print(f"run {number + 1}, {threads} thread(s): {measured['seconds']:.2f} s, {measured['cpu']:.2f} CPU-s, "
                  f"{measured['rows']:,} rows, {client.calls} calls", flush=True)  # fmt: skip
    baseline = args.threads[0]
    result: dict[str, Any] = {"machine": facts, "command": command_line(), "shards": args.shards,
                              "records_per_shard": args.records, "latency_s": args.latency, "threads": {}}  # fmt: skip
    for threads, measured in runs.items():
        speedup = [base["seconds"] / run["seconds"] for base, run in zip(runs[baseline], measured, strict=True)]
        result["threads"][threads] = {
            "seconds": summary([run["seconds"] for run in measured]),
            "cpu_seconds": summary([run["cpu"] for run in measured]),
            "speedup_over_in_turn": summary(speedup),
            "calls": statistics.median(run["calls"] for run in measured),
        }
        print(f"{threads} thread(s): {shown(result['threads'][threads]['seconds'], ' s')}; "
              f"against {baseline}: {shown(result['threads'][threads]['speedup_over_in_turn'], 'x')}")  # fmt: skip
    write_results("read_latency", result)


if __name__ == "__main__":
    main()
