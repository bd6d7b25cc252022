"""The emulator's cost per call at depth: PutRecords and GetRecords on a deep stream vs a fresh one.

moto 5.2.5 on its own scans a shard from its start on every put and every read, so its rates fall
as a stream grows (the issue measured 677 puts/s into a stream holding 200k records, 3,996/s into
a fresh one). ``icestream.kinesis.moto_kinesis`` reaches records by key instead. This benchmark fills one
stream to ``--deep`` records, then, ``--runs`` times and alternating, puts ``--batch-records``
records into it and into a fresh stream, and reads those records back with one GetRecords loop
(positioned after what was there before): the fresh stream is the baseline, measured in the same
run. It reports the deep/fresh ratios (target: at least 0.8 for both) and the emulator process's
resident memory once the deep stream holds ``--memory-records`` (records of ``--payload-bytes``).

Run: ``.venv/bin/python bench/bench_emulator.py`` (about 5 minutes: 500k records deep, memory at 1M).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, bare_client, bench_session, command_line, summary, write_results

PUT_BATCH = 500  # records per PutRecords call (the Kinesis limit)


def payloads(count: int, size: int) -> list[dict[str, Any]]:
    """``count`` PutRecords entries of ``size`` bytes with spread partition keys."""
    body = b"x" * size
    return [{"Data": body, "PartitionKey": uuid.uuid4().hex} for _ in range(count)]


def put_all(client: Any, stream: str, entries: list[dict[str, Any]]) -> float:
    """Send ``entries`` in 500-record calls; return records per second."""
    began = time.perf_counter()
    for start in range(0, len(entries), PUT_BATCH):
        answer = client.put_records(StreamName=stream, Records=entries[start : start + PUT_BATCH])
        if answer.get("FailedRecordCount"):
            raise RuntimeError(f"{answer['FailedRecordCount']} records failed in a put")
    return len(entries) / (time.perf_counter() - began)


def read_after(client: Any, stream: str, shard_id: str, after: str | None, expected: int) -> float:
    """Read ``expected`` records after sequence ``after`` (None: from the start); records per second."""
    position = (
        {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "StartingSequenceNumber": after}
        if after
        else {"ShardIteratorType": "TRIM_HORIZON"}
    )
    began = time.perf_counter()
    iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard_id, **position)["ShardIterator"]
    read = 0
    while read < expected:
        answer = client.get_records(ShardIterator=iterator, Limit=10_000)
        if not answer["Records"]:
            raise RuntimeError(f"read {read} of {expected} records, then nothing")
        read += len(answer["Records"])
        iterator = answer["NextShardIterator"]
    return read / (time.perf_counter() - began)


def measure(client: Any, stream: str, entries: list[dict[str, Any]], after: str | None) -> tuple[float, float, str]:
    """Put ``entries``, then read them back; ``(put rate, get rate, new last sequence)``."""
    put_rate = put_all(client, stream, entries)
    shard_id = client.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    get_rate = read_after(client, stream, shard_id, after, len(entries))
    last = client.put_records(StreamName=stream, Records=entries[:1])["Records"][0]["SequenceNumber"]
    return put_rate, get_rate, last


def fill(client: Any, stream: str, held: int, target: int, size: int) -> int:
    """Put records into ``stream`` until it holds ``target`` (it holds ``held``); return what it holds."""
    began = time.perf_counter()
    start = held
    while held < target:
        chunk = payloads(min(50_000, target - held), size)
        put_all(client, stream, chunk)
        held += len(chunk)
        print(f"filled {held:,} records ({(held - start) / (time.perf_counter() - began):,.0f}/s)", flush=True)
    return held


def resident_mib(pid: int) -> float:
    """Resident memory of a process in MiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deep", type=int, default=500_000, help="records in the deep stream before measuring")
    parser.add_argument("--batch-records", type=int, default=20_000, help="records put and read per measurement")
    parser.add_argument("--payload-bytes", type=int, default=300, help="bytes per record")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--memory-records", type=int, default=1_000_000, help="records held when memory is read")
    args = parser.parse_args()
    facts = banner("emulator cost at depth", command_line())
    with bench_session("emulator", shards=1, spark=False) as (settings, _):
        from icestream.kinesis.emulator import Emulator

        pid = Emulator(settings.path("run_dir")).status().pid
        client = bare_client(settings)
        deep, fresh_names = f"deep-{uuid.uuid4().hex[:6]}", []
        client.create_stream(StreamName=deep, ShardCount=1)
        client.get_waiter("stream_exists").wait(StreamName=deep)
        memory_before = resident_mib(pid)
        began = time.perf_counter()
        fill(client, deep, 0, args.deep, args.payload_bytes)
        fill_seconds = time.perf_counter() - began
        deep_last = client.put_records(StreamName=deep, Records=payloads(1, args.payload_bytes))["Records"][0]
        deep_after = deep_last["SequenceNumber"]
        rates: dict[str, list[float]] = {"fresh_put": [], "deep_put": [], "fresh_get": [], "deep_get": []}
        for run in range(args.runs):
            fresh = f"fresh-{uuid.uuid4().hex[:6]}"
            fresh_names.append(fresh)
            client.create_stream(StreamName=fresh, ShardCount=1)
            client.get_waiter("stream_exists").wait(StreamName=fresh)
            entries = payloads(args.batch_records, args.payload_bytes)
            order = [("fresh", fresh, None), ("deep", deep, deep_after)]
            for label, stream, after in order if run % 2 == 0 else reversed(order):  # alternate the order
                put_rate, get_rate, last = measure(client, stream, entries, after)
                rates[f"{label}_put"].append(put_rate)
                rates[f"{label}_get"].append(get_rate)
                if label == "deep":
                    deep_after = last
            print(
                f"run {run + 1}: put fresh {rates['fresh_put'][-1]:,.0f}/s deep {rates['deep_put'][-1]:,.0f}/s; "
                f"get fresh {rates['fresh_get'][-1]:,.0f}/s deep {rates['deep_get'][-1]:,.0f}/s",
                flush=True,
            )
        # Memory: top the deep stream up to --memory-records (the measured puts count too).
        held = args.deep + 1 + args.runs * (args.batch_records + 1)
        held = fill(client, deep, held, max(held, args.memory_records), args.payload_bytes)
        memory_after = resident_mib(pid)
    stats = {name: summary(values) for name, values in rates.items()}
    ratios = {
        "put_deep_over_fresh": stats["deep_put"]["median"] / stats["fresh_put"]["median"],
        "get_deep_over_fresh": stats["deep_get"]["median"] / stats["fresh_get"]["median"],
    }
    memory = {
        "records_held": held,
        "rss_before_fill_mib": round(memory_before, 1),
        "rss_after_fill_mib": round(memory_after, 1),
        "bytes_per_record": round((memory_after - memory_before) * 1024 * 1024 / held),
    }
    print(f"deep stream: {args.deep:,} records filled in {fill_seconds:.0f} s ({args.deep / fill_seconds:,.0f}/s)")
    for name, value in stats.items():
        print(f"{name:10s} median {value['median']:,.0f} records/s (min {value['min']:,.0f}, max {value['max']:,.0f})")
    print(f"ratios (deep / fresh, target >= 0.8): put {ratios['put_deep_over_fresh']:.2f}, "
          f"get {ratios['get_deep_over_fresh']:.2f}")  # fmt: skip
    print(f"emulator memory: {memory['rss_after_fill_mib']:.0f} MiB with {held:,} records "
          f"({memory['bytes_per_record']} bytes per {args.payload_bytes}-byte record)")  # fmt: skip
    write_results(
        "emulator",
        {
            "machine": facts,
            "command": command_line(),
            "parameters": vars(args),
            "fill_records_per_s": args.deep / fill_seconds,
            "rates": stats,
            "ratios": ratios,
            "memory": memory,
        },
    )


if __name__ == "__main__":
    main()
