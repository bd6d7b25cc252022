"""Scaling out: the same drain on a Spark standalone cluster of 1 worker and of 2 workers (one core each).

A stream of about ``--records`` generated records on ``--shards`` shards is drained by the ingest
job (``python -m icestream.jobs.ingest --available-now``), a separate driver process on a standalone
cluster on loopback (:class:`icestream.runtime.standalone.StandaloneCluster`) whose executors get the packed
environment (``ICESTREAM_SHIP=packed``), into fresh tables each time; ``--runs`` times per cluster
size, alternating 1, 2, 2, 1, ... so drift in the machine's load hits both sizes alike.

Reported per size: the drain's rate (records read / the batches' summed wall time), the same
without the first batch (which pays for starting the executors' Python and importing pyarrow,
pandas and boto3), and the job's whole wall time (driver JVM, executors and the archive's unpacking
included). Baseline in the same run: the 1-worker cluster; the ratio is 2 workers / 1 worker.

Caveat, printed with the result: the emulator, the driver and both workers share this machine's
cores. Each batch also has driver-side work (planning, dedupe, two Iceberg commits) that more
executors do not shorten; a ratio near 1 says the machine, not Spark, was the limit.

Run: ``.venv/bin/python bench/bench_cluster.py`` (about 8 minutes with the defaults).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import SCRATCH, banner, bench_session, command_line, fill_stream, new_table_settings, summary, write_results

CAVEAT = (
    "the Kinesis emulator, the driver and every worker share this machine's cores, and each batch's "
    "planning, dedupe and commits run on the driver: the ratio is a lower bound for separate machines"
)


def drain(spark: Any, settings: Any, master_url: str, cap: int, folder: Path) -> dict[str, Any]:
    """Run the ingest job once on the cluster into fresh tables; time it and read its progress."""
    from icestream.kinesis.clients import kinesis_connection
    from icestream.lake import setup_tables

    target = new_table_settings(settings.stream_name, prefix="cluster")
    setup_tables(spark, target)
    run_dir = Path(tempfile.mkdtemp(dir=folder))
    env = {
        **os.environ,
        "ICESTREAM_SPARK_MASTER": master_url,
        "ICESTREAM_SHIP": "packed",
        "ICESTREAM_STREAM_NAME": target.stream_name,
        "ICESTREAM_TABLE": target.table,
        "ICESTREAM_KINESIS_ENDPOINT": kinesis_connection(settings).endpoint or "",
        "ICESTREAM_RUN_DIR": str(run_dir),  # this run's progress file
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    command = [sys.executable, "-m", "icestream.jobs.ingest", "--available-now", "--trigger", "0", "--quiet",
               "--max-records-per-shard", str(cap)]  # fmt: skip
    began = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=1800)
    wall = time.perf_counter() - began
    if result.returncode != 0:
        raise SystemExit(f"the ingest job failed:\n{result.stderr[-3000:]}")
    progress = [json.loads(line) for line in (run_dir / "ingest_progress.jsonl").read_text().splitlines()]
    seconds = [batch["duration_ms"]["total"] / 1000 for batch in progress]
    rows = [batch["num_input_rows"] for batch in progress]
    return {
        "wall_s": wall,
        "batches": len(progress),
        "read": sum(rows),
        "written": sum(batch["written"] for batch in progress),
        "drain_s": sum(seconds),
        "rate": sum(rows) / sum(seconds),
        "rate_after_first_batch": sum(rows[1:]) / sum(seconds[1:]) if len(progress) > 1 else None,
        "first_batch_s": seconds[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000, help="records in the stream")
    parser.add_argument("--shards", type=int, default=4, help="shards: read tasks per batch")
    parser.add_argument("--cap", type=int, default=1_000, help="max_records_per_shard: records per shard and batch")
    parser.add_argument("--runs", type=int, default=2, help="drains per cluster size")
    args = parser.parse_args()
    facts = banner("cluster: the same drain on 1 and 2 standalone workers of one core", command_line())
    print(f"caveat:   {CAVEAT}")

    from icestream.runtime.shipping import ship_plan
    from icestream.runtime.standalone import StandaloneCluster

    with bench_session("cluster", shards=args.shards) as (settings, spark):
        sent = fill_stream(settings, args.records, args.shards)
        # Build the executors' environment before timing anything (first time: about a minute).
        plan = ship_plan(dataclasses.replace(settings, spark_master="spark://127.0.0.1:1", ship="packed"))
        print(
            f"shipping: {', '.join(f'{path.name} ({path.stat().st_size / 2**20:.0f} MiB)' for path in plan.artifacts)}"
        )
        folder = SCRATCH / "cluster" / "clusters"
        folder.mkdir(parents=True, exist_ok=True)
        runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        for run in range(args.runs):
            for workers in (1, 2) if run % 2 == 0 else (2, 1):
                with StandaloneCluster(Path(tempfile.mkdtemp(dir=folder)), workers=workers, cores=1) as cluster:
                    measured = drain(spark, settings, cluster.master_url, args.cap, folder)
                runs[workers].append(measured)
                print(
                    f"  {workers} worker(s), run {run + 1}: {measured['read']} records in {measured['batches']} "
                    f"batches, drain {measured['drain_s']:.1f} s ({measured['rate']:.0f} records/s), "
                    f"first batch {measured['first_batch_s']:.1f} s, job wall {measured['wall_s']:.1f} s",
                    flush=True,
                )

    sizes = {}
    for workers, measured in runs.items():
        after_first = [run["rate_after_first_batch"] for run in measured if run["rate_after_first_batch"]]
        sizes[str(workers)] = {
            "rate": summary([run["rate"] for run in measured]),
            "rate_after_first_batch": summary(after_first) if after_first else None,
            "drain_s": summary([run["drain_s"] for run in measured]),
            "wall_s": summary([run["wall_s"] for run in measured]),
            "written": sorted({run["written"] for run in measured}),
            "runs": measured,
        }
    ratio = statistics.median(r["rate"] for r in runs[2]) / statistics.median(r["rate"] for r in runs[1])
    steady = [sizes[key]["rate_after_first_batch"] for key in ("1", "2")]
    steady_ratio = steady[1]["median"] / steady[0]["median"] if all(steady) else None
    print(
        f"\n2 workers / 1 worker: drain rate x{ratio:.2f}"
        + (f", after the first batch x{steady_ratio:.2f}" if steady_ratio else "")
    )
    print(f"(caveat: {CAVEAT})")
    write_results(
        "cluster",
        {
            "machine": facts,
            "records_sent": sent,
            "shards": args.shards,
            "max_records_per_shard": args.cap,
            "workers": sizes,
            "ratio_2_over_1": ratio,
            "ratio_2_over_1_after_first_batch": steady_ratio,
            "caveat": CAVEAT,
        },
    )


if __name__ == "__main__":
    main()
