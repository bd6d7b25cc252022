"""Growth (item 7 of the issue's list, "growth"): does metadata slow the pipeline as the table grows?

One table is grown to 1, 10 and 100 batches' worth of snapshots and files (``--checkpoints``): each
growth step is one Iceberg append of ``--events-per-batch`` events (a 1 s batch at 500 events/s)
in the same hours the stream covers, made with ``icestream.file_load.bulk.load_payloads``. At each
checkpoint, in the same run:

- the ingest drains ``--measure-batches`` batches of 4 × ``--records-per-shard`` records from a
  pre-filled stream into that table (dedupe on, so it also reads the committed rows in its lookback;
  a new query each time, so it also recovers its positions by walking the snapshot ancestry), and
  the per-batch wall time and phases are recorded;
- the dashboard query runs over the whole table in Spark and in DuckDB (medians of ``--runs``).

Reported: medians per checkpoint and ratios against the 1-batch checkpoint. The measurement batches
themselves add a few snapshots; the snapshot and file counts shown are the table's real ones.

Run: ``.venv/bin/python bench/bench_growth.py`` (about 2 minutes), or ``make bench``.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, bench_session, command_line, median_phases, run_ingest, summary, timed, write_results


def counts(table: Any) -> dict[str, int]:
    """Snapshots, data files, manifests of the current snapshot, and rows (a ``LakeTable``)."""
    return {
        "snapshots": len(table.inspect.snapshots()),
        "data_files": len(table.inspect.data_files()),
        "manifests": len(table.inspect.manifests()),
        "rows": table.versions.row_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", default="1,10,100", help="batches' worth of appends to measure at")
    parser.add_argument("--events-per-batch", type=int, default=500)
    parser.add_argument("--measure-batches", type=int, default=3, help="ingest batches timed per checkpoint")
    parser.add_argument("--records-per-shard", type=int, default=500, help="ingest batch size per shard")
    parser.add_argument("--runs", type=int, default=3, help="timed query runs per engine and checkpoint")
    args = parser.parse_args()
    checkpoints = sorted(int(value) for value in args.checkpoints.split(","))

    facts = banner("growth: ingest batch cost and query time as snapshots and files accumulate", command_line())
    from icestream.config import load_settings
    from icestream.file_load.bulk import load_payloads
    from icestream.kinesis.clients import ensure_stream
    from icestream.lake import LakeTable
    from icestream.producer.put import produce
    from icestream.queries import duckdb_engine as duck
    from icestream.queries import realtime
    from icestream.synthetic.generator import backfill_config, generate

    rows = []
    with bench_session("growth") as (_settings, spark):
        end = datetime.now(UTC).replace(microsecond=0)
        total = checkpoints[-1] * args.events_per_batch
        config = backfill_config(hours=1, count=total, end=end - timedelta(minutes=5), seed=21, bad_rate=0.0)
        history, _ = generate(config)
        stream = load_settings(stream_name=f"bench-growth-{uuid.uuid4().hex[:6]}", table="growing")
        ensure_stream(stream, shard_count=4)
        needed = (len(checkpoints) * args.measure_batches + 3) * 4 * args.records_per_shard
        live, _ = generate(backfill_config(hours=0.1, count=needed, end=end, seed=22, bad_rate=0.0))
        produce(stream, live, progress=False)
        table = stream.table_name
        lake_table = LakeTable(spark, table)
        connection = duck.connect()
        appended = 0
        # Warm the JVM and the Python workers on the empty table, so checkpoint 1 is not the slowest by start-up.
        run_ingest(spark, stream, dedupe=True, max_records_per_shard=args.records_per_shard, max_batches=2,
                   duration_seconds=300)  # fmt: skip
        for checkpoint in checkpoints:
            chunk = history[appended * args.events_per_batch : checkpoint * args.events_per_batch]
            growth_seconds, _ = timed(
                lambda chunk=chunk: load_payloads(
                    spark, table, ((r.data, r.partition_key) for r in chunk), chunk_rows=args.events_per_batch
                )
            )
            appended = checkpoint
            ingest = run_ingest(
                spark, stream, dedupe=True, max_records_per_shard=args.records_per_shard,
                max_batches=args.measure_batches, duration_seconds=300,
            )  # fmt: skip
            location, snapshot_id = lake_table.inspect.metadata_location()
            spark_run = lambda snapshot_id=snapshot_id: realtime.kpi_dashboard(lake_table, snapshot_id=snapshot_id)  # noqa: E731
            duck_run = lambda location=location: duck.kpi_dashboard(connection, location)  # noqa: E731
            spark_run(), duck_run()
            row = {
                "batches_appended": checkpoint,
                **counts(lake_table),
                "growth_append_seconds_each": growth_seconds / max(1, len(chunk) / args.events_per_batch),
                "ingest_batch_seconds": summary([batch["total"] for batch in ingest["phases"]]),
                "ingest_query_seconds": ingest["seconds"],
                "ingest_phases_s_median": median_phases(ingest["phases"]),
                "spark_dashboard_seconds": summary([timed(spark_run)[0] for _ in range(args.runs)]),
                "duckdb_dashboard_seconds": summary([timed(duck_run)[0] for _ in range(args.runs)]),
            }
            rows.append(row)
            print(
                f"{checkpoint:4d} batches appended: {row['snapshots']} snapshots, {row['data_files']} files, "
                f"{row['manifests']} manifests, {row['rows']} rows; ingest batch "
                f"{row['ingest_batch_seconds']['median']:.2f} s (query incl. start {ingest['seconds']:.1f} s); "
                f"dashboard Spark {row['spark_dashboard_seconds']['median']:.3f} s, "
                f"DuckDB {row['duckdb_dashboard_seconds']['median']:.3f} s",
                flush=True,
            )
    first = rows[0]
    for row in rows:
        row["ratios_to_first"] = {
            key: row[key]["median"] / first[key]["median"]
            for key in ("ingest_batch_seconds", "spark_dashboard_seconds", "duckdb_dashboard_seconds")
        }
    last = rows[-1]
    print(
        f"{last['batches_appended']} vs {first['batches_appended']} batches: ingest batch ×"
        f"{last['ratios_to_first']['ingest_batch_seconds']:.2f}, Spark dashboard ×"
        f"{last['ratios_to_first']['spark_dashboard_seconds']:.2f}, DuckDB dashboard ×"
        f"{last['ratios_to_first']['duckdb_dashboard_seconds']:.2f}"
    )
    write_results("growth", {"machine": facts, "command": command_line(), "checkpoints": rows})


if __name__ == "__main__":
    main()
