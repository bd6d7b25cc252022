"""Scaling of the ingest (item 2): throughput by shard count and by ``max_records_per_shard``.

For each shard count (``--shards``, default 1, 2, 4, 8) a stream of about ``--records`` records is
filled, drained once by a bare boto3 GetRecords loop (the emulator's ceiling for that stream) and
``--runs`` times by the ingest (``available_now``, dedupe on, ``max_records_per_shard`` 10,000) into
fresh tables. Then the 4-shard stream is drained with each cap in ``--caps`` (default 1,000, 10,000
and 50,000 records per shard and batch). Every batch's wall time is split by phase (plan, read,
parse, dedupe, write, commit; see ``common.batch_phases``) so the bottleneck shows.

Baselines measured in the same run: 1 shard (for the shard series), cap 10,000 (for the cap
series), and each stream's ceiling.

Run: ``.venv/bin/python bench/bench_scaling.py`` (about 3 minutes), or ``make bench``.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    banner,
    bench_session,
    command_line,
    fill_stream,
    median_phases,
    new_table_settings,
    raw_drain,
    run_ingest,
    summary,
    timed,
    write_results,
)


def point(spark: Any, stream: Any, runs: int, cap: int) -> dict[str, Any]:
    """Drain ``stream`` ``runs`` times with the ingest at ``cap``; medians and per-batch phases."""
    drains = [
        run_ingest(spark, new_table_settings(stream.stream_name), dedupe=True, max_records_per_shard=cap)
        for _ in range(runs)
    ]
    every_batch = [batch for drain in drains for batch in drain["phases"]]
    return {
        "records_per_s": summary([drain["rate"] for drain in drains]),
        "seconds": summary([drain["seconds"] for drain in drains]),
        "batches": drains[0]["batches"],
        "records": drains[0]["read"],
        "batch_phases_s_median": median_phases(every_batch),
        "batch_seconds": summary([batch["total"] for batch in every_batch]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000, help="records per stream")
    parser.add_argument("--shards", default="1,2,4,8", help="comma-separated shard counts")
    parser.add_argument("--caps", default="1000,10000,50000", help="comma-separated max_records_per_shard")
    parser.add_argument("--runs", type=int, default=2, help="ingest drains per point")
    args = parser.parse_args()
    shard_counts = [int(value) for value in args.shards.split(",")]
    caps = [int(value) for value in args.caps.split(",")]

    facts = banner("ingest scaling by shards and by max_records_per_shard", command_line())
    results: dict[str, Any] = {"machine": facts, "command": command_line(), "shards": [], "caps": []}
    from icestream.config import load_settings

    with bench_session("scaling") as (_settings, spark):
        warm = load_settings(stream_name=f"bench-warm-{uuid.uuid4().hex[:6]}")
        fill_stream(warm, 2_000, 2)
        run_ingest(spark, new_table_settings(warm.stream_name), dedupe=True)  # warm-up: workers, clients
        streams = {}
        for shards in shard_counts:
            stream = load_settings(stream_name=f"bench-scale-{shards}-{uuid.uuid4().hex[:6]}")
            sent = fill_stream(stream, args.records, shards)
            streams[shards] = stream
            seconds, count = timed(lambda stream=stream: raw_drain(stream))
            measured = point(spark, stream, args.runs, 10_000)
            measured |= {"shards": shards, "sent": sent, "ceiling_records_per_s": count / seconds}
            results["shards"].append(measured)
            phases = measured["batch_phases_s_median"]
            print(
                f"{shards} shard(s): ingest {measured['records_per_s']['median']:7.0f} rec/s, ceiling "
                f"{measured['ceiling_records_per_s']:7.0f} rec/s, {measured['batches']} batches; median batch "
                + ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if k != "records"),
                flush=True,
            )
        base_stream = streams.get(4) or streams[max(streams)]
        for cap in caps:
            measured = point(spark, base_stream, args.runs, cap) | {"max_records_per_shard": cap}
            results["caps"].append(measured)
            phases = measured["batch_phases_s_median"]
            print(
                f"cap {cap:6d}/shard: ingest {measured['records_per_s']['median']:7.0f} rec/s, "
                f"{measured['batches']} batches; median batch "
                + ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if k != "records"),
                flush=True,
            )
    one = results["shards"][0]["records_per_s"]["median"]
    for row in results["shards"]:
        row["ratio_to_first"] = row["records_per_s"]["median"] / one
        row["ratio_to_ceiling"] = row["records_per_s"]["median"] / row["ceiling_records_per_s"]
    base = next((row for row in results["caps"] if row["max_records_per_shard"] == 10_000), results["caps"][0])
    for row in results["caps"]:
        row["ratio_to_cap_10000"] = row["records_per_s"]["median"] / base["records_per_s"]["median"]
    print("shards  rec/s  ×1-shard  /ceiling")
    for row in results["shards"]:
        print(
            f"{row['shards']:6d} {row['records_per_s']['median']:6.0f} {row['ratio_to_first']:8.2f} "
            f"{row['ratio_to_ceiling']:8.2f}"
        )
    print("cap/shard  rec/s  ×cap-10000  batch s")
    for row in results["caps"]:
        print(
            f"{row['max_records_per_shard']:9d} {row['records_per_s']['median']:6.0f} "
            f"{row['ratio_to_cap_10000']:10.2f} {row['batch_seconds']['median']:8.2f}"
        )
    write_results("scaling", results)


if __name__ == "__main__":
    main()
