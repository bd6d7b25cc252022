"""Small files and maintenance (item 4): what 1 s commits leave behind, and what compaction does.

A streaming ingest with a 1 s trigger commits up to 3,600 times an hour, each commit adding a small
data file per partition it touches. Making 3,600 real commits takes too long for a benchmark, so
this appends ``--commits`` batches of ``--events-per-commit`` events (default 100 × 500: 100 s
at 500 events/s) with ``icestream.file_load.bulk.load_payloads`` (one Iceberg append per
batch, like the ingest's), all in one hour partition, and extrapolates linearly to an hour of 1 s
commits: files/hour = files per commit × 3,600 (average file size as measured). The extrapolation
is labelled as such in the output.

Then ``rewrite_data_files`` (binpack, ``min-input-files`` 2, via ``LakeTable.maintenance``) and
``rewrite_manifests`` compact the table; both are timed. Reported: data files, average file size,
manifests and snapshots before and after, and the dashboard query's time in Spark and DuckDB before
and after (medians of ``--runs``; ratio after / before).

Run: ``.venv/bin/python bench/bench_maintenance.py`` (about 1.5 minutes), or ``make bench``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, bench_session, command_line, summary, timed, write_results

HOUR_OF_COMMITS = 3_600  # 1 s trigger


def table_numbers(table: Any) -> dict[str, Any]:
    """Files, sizes, manifests and snapshots from the metadata tables (``icestream.queries.health``)."""
    from icestream.queries.health import collect_stats

    stats = collect_stats(table)
    return {
        "records": stats.records,
        "data_files": stats.data_files,
        "average_file_kib": stats.average_file_bytes / 1024,
        "data_mib": stats.data_bytes / 2**20,
        "manifests": stats.manifests,
        "snapshots": stats.snapshots,
        "metadata_mib": stats.metadata_bytes / 2**20,
        "target_file_mib": stats.target_file_bytes / 2**20,
    }


def query_times(table: Any, runs: int) -> dict[str, dict[str, float]]:
    """Dashboard over the whole table, Spark and DuckDB, after one warm-up each."""
    from icestream.queries import duckdb_engine as duck
    from icestream.queries import realtime

    location, snapshot_id = table.inspect.metadata_location()
    connection = duck.connect()
    engines = {
        "spark": lambda: realtime.kpi_dashboard(table, snapshot_id=snapshot_id),
        "duckdb": lambda: duck.kpi_dashboard(connection, location),
    }
    times = {}
    for engine, run in engines.items():
        run()
        times[engine] = summary([timed(run)[0] for _ in range(runs)])
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100, help="small appends (1 s batches) to make")
    parser.add_argument("--events-per-commit", type=int, default=500, help="events per append (500 ev/s × 1 s)")
    parser.add_argument("--runs", type=int, default=3, help="timed query runs before and after")
    args = parser.parse_args()

    facts = banner("small files and maintenance", command_line())
    from icestream.config import load_settings
    from icestream.file_load.bulk import load_payloads
    from icestream.lake import LakeTable, setup_tables
    from icestream.lake.maintenance import default_rewrite_options
    from icestream.synthetic.generator import backfill_config, generate

    with bench_session("maintenance") as (_settings, spark):
        settings = load_settings(table="small_files")
        setup_tables(spark, settings)
        table = settings.table_name
        lake_table = LakeTable(spark, table)
        # One closed hour of event time, so every commit lands in the same hour partition.
        hour_end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        config = backfill_config(hours=1, count=args.commits * args.events_per_commit, end=hour_end, seed=11,
                                 bad_rate=0.0, duplicate_rate=0.0, late_rate=0.0)  # fmt: skip
        records, _ = generate(config)
        load_seconds, counts = timed(
            lambda: load_payloads(
                spark, table, ((r.data, r.partition_key) for r in records), chunk_rows=args.events_per_commit
            )
        )
        commits = -(-counts["written"] // args.events_per_commit)
        before = table_numbers(lake_table)
        files_per_commit = before["data_files"] / commits
        print(
            f"{commits} appends of {args.events_per_commit} events in {load_seconds:.1f} s "
            f"({load_seconds / commits:.2f} s per append, parsing included): {before['data_files']} data files, "
            f"average {before['average_file_kib']:.1f} KiB, {before['manifests']} manifests, "
            f"{before['snapshots']} snapshots",
            flush=True,
        )
        hour = {
            "commits": HOUR_OF_COMMITS,
            "data_files": round(files_per_commit * HOUR_OF_COMMITS),
            "average_file_kib": before["average_file_kib"],
            "data_mib": before["data_mib"] / commits * HOUR_OF_COMMITS,
        }
        print(
            f"extrapolated to an hour of 1 s commits: about {hour['data_files']} data files of "
            f"{hour['average_file_kib']:.1f} KiB ({hour['data_mib']:.0f} MiB) before compaction",
            flush=True,
        )
        queries_before = query_times(lake_table, args.runs)
        maintenance = lake_table.maintenance
        rewrite_seconds, outcome = timed(lambda: maintenance.rewrite_data_files(options=default_rewrite_options()))
        manifest_seconds, manifest_outcome = timed(maintenance.rewrite_manifests)
        rewritten, manifests = outcome.counts, manifest_outcome.counts
        after = table_numbers(lake_table)
        queries_after = query_times(lake_table, args.runs)
        print(
            f"rewrite_data_files: {rewrite_seconds:.1f} s ({rewritten.get('rewritten_data_files_count')} files → "
            f"{rewritten.get('added_data_files_count')}); rewrite_manifests: {manifest_seconds:.1f} s "
            f"({manifests.get('rewritten_manifests_count')} → {manifests.get('added_manifests_count')})"
        )
        print(
            f"after: {after['data_files']} data files, average {after['average_file_kib']:.1f} KiB, "
            f"{after['manifests']} manifests"
        )
        ratios = {
            engine: queries_after[engine]["median"] / queries_before[engine]["median"] for engine in queries_before
        }
        for engine in queries_before:
            print(
                f"dashboard {engine:6s}: before {queries_before[engine]['median']:.3f} s, after "
                f"{queries_after[engine]['median']:.3f} s (after / before {ratios[engine]:.2f})"
            )
    write_results(
        "maintenance",
        {
            "machine": facts,
            "command": command_line(),
            "commits": commits,
            "events_per_commit": args.events_per_commit,
            "append_seconds_per_commit": load_seconds / commits,
            "before": before,
            "hour_extrapolated": hour,
            "rewrite_data_files_seconds": rewrite_seconds,
            "rewrite_data_files": rewritten,
            "rewrite_manifests_seconds": manifest_seconds,
            "rewrite_manifests": manifests,
            "compaction_seconds_hour_extrapolated": rewrite_seconds * HOUR_OF_COMMITS / commits,
            "after": after,
            "query_seconds_before": queries_before,
            "query_seconds_after": queries_after,
            "query_ratio_after_to_before": ratios,
            "file_ratio_after_to_before": after["data_files"] / before["data_files"],
        },
    )


if __name__ == "__main__":
    main()
