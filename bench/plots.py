"""Charts of the benchmark results: one PNG per benchmark under ``bench/results/``.

Every function takes the benchmark's JSON (as a dict) and the output path, and draws with
matplotlib (Agg backend, no display needed): axes labelled with units, a title, medians as bars or
points with min–max whiskers where several runs were made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend is chosen

PHASE_COLOURS = {
    "plan": "#bbbbbb",
    "read": "#4c72b0",
    "parse": "#8172b2",
    "dedupe": "#dd8452",
    "write": "#55a868",
    "commit": "#c44e52",
}


def _whiskers(stats: list[dict[str, float]]) -> list[list[float]]:
    return [[s["median"] - s["min"] for s in stats], [s["max"] - s["median"] for s in stats]]


def _save(figure: Any, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def ingest(result: dict[str, Any], path: Path) -> Path:
    """Throughput bars (ceiling, ingest with and without dedupe) and the median drain's phases."""
    data = result["throughput"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    keys = ["ceiling_records_per_s", "ingest_dedupe_records_per_s", "ingest_no_dedupe_records_per_s"]
    stats = [data[key] for key in keys]
    left.bar(["bare GetRecords\n(ceiling)", "ingest\ndedupe on", "ingest\ndedupe off"],
             [s["median"] for s in stats], yerr=_whiskers(stats), capsize=4,
             color=["#999999", "#4c72b0", "#55a868"])  # fmt: skip
    left.axhline(0.7 * data["ceiling_records_per_s"]["median"], color="#c44e52", linestyle="--",
                 label="target: 0.7 × ceiling")  # fmt: skip
    left.set_ylabel("records per second (median, min–max)")
    left.set_title(f"Draining {data['records']:,} records from {data['shards']} shards")
    left.legend()
    phases = {k: v for k, v in data["phases_s_median_run"].items() if k in PHASE_COLOURS}
    bottom = 0.0
    for name, seconds in phases.items():
        right.barh(["dedupe on"], [seconds], left=bottom, color=PHASE_COLOURS[name], label=name)
        bottom += seconds
    other = data.get("phases_s_median_run_no_dedupe", {})
    bottom = 0.0
    for name in phases:
        right.barh(["dedupe off"], [other.get(name, 0.0)], left=bottom, color=PHASE_COLOURS[name])
        bottom += other.get(name, 0.0)
    right.set_xlabel("seconds in the median drain (summed over its batches)")
    right.set_title("Where the ingest's time goes, by phase")
    right.legend(ncol=6, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    return _save(figure, path)


def _phase_bars(axis: Any, labels: list[str], phase_rows: list[dict[str, float]], title: str, xlabel: str) -> None:
    bottoms = [0.0] * len(labels)
    for name, colour in PHASE_COLOURS.items():
        values = [row.get(name, 0.0) for row in phase_rows]
        axis.bar(labels, values, bottom=bottoms, color=colour, label=name)
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    axis.set_ylabel("seconds per batch (median)")
    axis.set_xlabel(xlabel)
    axis.set_title(title)


def scaling(result: dict[str, Any], path: Path) -> Path:
    """Throughput by shards and by cap (top), the median batch by phase (bottom)."""
    figure, axes = plt.subplots(2, 2, figsize=(11, 8))
    shards = result["shards"]
    caps = result["caps"]
    x = [row["shards"] for row in shards]
    axes[0][0].errorbar(x, [row["records_per_s"]["median"] for row in shards],
                        yerr=_whiskers([row["records_per_s"] for row in shards]), marker="o", capsize=4,
                        label="ingest (dedupe on)")  # fmt: skip
    axes[0][0].plot(x, [row["ceiling_records_per_s"] for row in shards], marker="s", color="#999999",
                    label="bare GetRecords (ceiling)")  # fmt: skip
    axes[0][0].set_xscale("log", base=2)
    axes[0][0].set_xticks(x, [str(value) for value in x])
    axes[0][0].set_xlabel("shards")
    axes[0][0].set_ylabel("records per second")
    axes[0][0].set_title("Throughput by shard count (cap 10,000/shard)")
    axes[0][0].legend()
    labels = [f"{row['max_records_per_shard']:,}" for row in caps]
    axes[0][1].bar(labels, [row["records_per_s"]["median"] for row in caps],
                   yerr=_whiskers([row["records_per_s"] for row in caps]), capsize=4, color="#4c72b0")  # fmt: skip
    axes[0][1].set_xlabel("max_records_per_shard (records per shard and batch)")
    axes[0][1].set_ylabel("records per second")
    axes[0][1].set_title("Throughput by batch cap (4 shards)")
    _phase_bars(axes[1][0], [str(value) for value in x], [row["batch_phases_s_median"] for row in shards],
                "Median batch by phase, by shard count", "shards")  # fmt: skip
    _phase_bars(axes[1][1], labels, [row["batch_phases_s_median"] for row in caps],
                "Median batch by phase, by cap", "max_records_per_shard")  # fmt: skip
    axes[1][1].legend(fontsize=8)
    return _save(figure, path)


def freshness(result: dict[str, Any], path: Path) -> Path:
    """p50/p95/p99 per (rate, trigger) point, with the p95 target."""
    points = [point for point in result["points"] if "p95" in point]
    figure, axis = plt.subplots(figsize=(9, 4.5))
    labels = [f"{point['rate']:,.0f} ev/s\n{point['trigger_s']:g} s trigger" for point in points]
    width = 0.27
    for offset, key, colour in ((-width, "p50", "#4c72b0"), (0.0, "p95", "#dd8452"), (width, "p99", "#c44e52")):
        axis.bar([i + offset for i in range(len(points))], [point[key] for point in points], width, label=key,
                 color=colour)  # fmt: skip
    axis.axhline(result["target_p95_s"], color="black", linestyle="--", label="target p95 at 500 ev/s, 0.5 s trigger")
    axis.set_xticks(range(len(points)), labels)
    axis.set_ylabel("seconds from Kinesis arrival to visible in a query")
    axis.set_title("Freshness by event rate and trigger")
    axis.legend()
    return _save(figure, path)


def maintenance(result: dict[str, Any], path: Path) -> Path:
    """Files and average size before and after compaction; dashboard time before and after."""
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(13, 4.2))
    before, after, hour = result["before"], result["after"], result["hour_extrapolated"]
    labels = [f"after {result['commits']}\n1 s commits", "after\ncompaction", "an hour of 1 s\ncommits (extrap.)"]
    left.bar(labels, [before["data_files"], after["data_files"], hour["data_files"]],
             color=["#dd8452", "#55a868", "#cccccc"])  # fmt: skip
    left.set_yscale("log")
    left.set_ylabel("data files (log scale)")
    left.set_title("Data files")
    middle.bar(labels[:2], [before["average_file_kib"], after["average_file_kib"]], color=["#dd8452", "#55a868"])
    middle.set_ylabel("average data file size (KiB)")
    middle.set_title(f"File size (compaction took {result['rewrite_data_files_seconds']:.1f} s)")
    engines = list(result["query_seconds_before"])
    width = 0.38
    for offset, key, colour, name in ((-width / 2, "query_seconds_before", "#dd8452", "before"),
                                      (width / 2, "query_seconds_after", "#55a868", "after")):  # fmt: skip
        stats = [result[key][engine] for engine in engines]
        right.bar([i + offset for i in range(len(engines))], [s["median"] for s in stats], width,
                  yerr=_whiskers(stats), capsize=4, color=colour, label=f"{name} compaction")  # fmt: skip
    right.set_xticks(range(len(engines)), ["Spark", "DuckDB"])
    right.set_ylabel("dashboard query seconds (median)")
    right.set_title("Query time before and after")
    right.legend()
    return _save(figure, path)


def queries(dashboards: list[dict[str, Any]], suite: dict[str, Any] | None, path: Path) -> Path:
    """Spark and DuckDB side by side for each query and table size (log scale)."""
    bars: list[tuple[str, float, float]] = []
    for dashboard in dashboards:
        events = dashboard["table"]["events"]
        medians = dashboard["median_seconds"]
        bars.append((f"dashboard\n{events / 1e6:.0f}M", medians["spark"], medians["duckdb"]))
    for size in (suite or {}).get("sizes", []):
        for query in ("sessions", "anomaly"):
            if query in size:
                bars.append((f"{query}\n{size['events'] / 1e6:.0f}M", size[query]["spark_seconds"]["median"],
                             size[query]["duckdb_seconds"]["median"]))  # fmt: skip
    figure, axis = plt.subplots(figsize=(max(8, 1.6 * len(bars)), 4.5))
    width = 0.38
    axis.bar([i - width / 2 for i in range(len(bars))], [b[1] for b in bars], width, label="Spark (local[*])",
             color="#dd8452")  # fmt: skip
    axis.bar([i + width / 2 for i in range(len(bars))], [b[2] for b in bars], width, label="DuckDB", color="#4c72b0")
    axis.set_xticks(range(len(bars)), [b[0] for b in bars])
    axis.set_yscale("log")
    axis.set_ylabel("seconds, warm (median; log scale)")
    axis.set_title("Queries, Spark and DuckDB on the same snapshot")
    axis.legend()
    return _save(figure, path)


def growth(result: dict[str, Any], path: Path) -> Path:
    """Ingest batch time and dashboard time against batches' worth of snapshots."""
    rows = result["checkpoints"]
    x = [row["batches_appended"] for row in rows]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.errorbar(x, [row["ingest_batch_seconds"]["median"] for row in rows],
                  yerr=_whiskers([row["ingest_batch_seconds"] for row in rows]), marker="o", capsize=4)  # fmt: skip
    left.set_xscale("log")
    left.set_ylim(bottom=0)
    left.set_xlabel("batches appended before (snapshots and files, log scale)")
    left.set_ylabel("seconds per ingest batch (median, min–max)")
    left.set_title("Ingest batch cost as the table grows")
    for key, label, colour in (("spark_dashboard_seconds", "Spark", "#dd8452"),
                               ("duckdb_dashboard_seconds", "DuckDB", "#4c72b0")):  # fmt: skip
        right.errorbar(x, [row[key]["median"] for row in rows], yerr=_whiskers([row[key] for row in rows]),
                       marker="o", capsize=4, label=label, color=colour)  # fmt: skip
    right.set_xscale("log")
    right.set_ylim(bottom=0)
    right.set_xlabel("batches appended before (log scale)")
    right.set_ylabel("dashboard query seconds (median)")
    right.set_title("Query time as the table grows")
    right.legend()
    return _save(figure, path)


def workbook(result: dict[str, Any], path: Path) -> Path:
    """Seconds per notebook, one kernel for the run beside a kernel per notebook, and the total against the target."""
    notebooks = result["notebooks_seconds"]
    baseline = result.get("baseline_notebooks_seconds", {})
    figure, axis = plt.subplots(figsize=(9, 4.2))
    names = list(notebooks)
    rows = range(len(names))
    if baseline:
        axis.barh([row + 0.2 for row in rows], [baseline[name]["median"] for name in names], height=0.4,
                  color="#bbbbbb", label="a kernel per notebook")  # fmt: skip
    axis.barh([row - 0.2 * bool(baseline) for row in rows], [notebooks[name]["median"] for name in names],
              height=0.4 if baseline else 0.8, color="#4c72b0", label="one kernel for the run")  # fmt: skip
    axis.set_yticks(list(rows), names)
    axis.invert_yaxis()
    axis.set_xlabel("wall seconds (median)")
    axis.legend(loc="lower right")
    total = result["total_seconds"]["median"]
    axis.set_title(f"Every notebook after set-up: {total:.0f} s in all (target ≤ {result['target_seconds']:.0f} s)")
    return _save(figure, path)
