"""The continuous aggregate growing: events sent in parts, ingested with ``--metrics`` (notebook 07).

:func:`metrics_stream_demo` sends an hour of generated events (repeats, late events, a few malformed
records) in ``parts`` to a stream of its own, ``<stream>-metrics``, and after each part runs the
ingest with ``metrics=True`` into ``<table>_metrics_demo``: every batch commits its events, then
folds them into ``<table>_metrics_demo_metrics`` with one ``MERGE``. After each part it reads the
metrics table back (per minute: events, and the groups), so a chart shows the aggregate growing,
late events landing in minutes already shown. The tables are dropped and made again on every run,
so a second run reads as the first (only tables the demo made: :mod:`icestream.lake.demo_tables`);
the stream is deleted afterwards. It runs on the local emulator only (on AWS it would create and pay
for a stream).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from icestream.config import METRICS_DEMO_SUFFIX
from icestream.demos.routed_demo import start_afresh
from icestream.ingest.query import start_ingest
from icestream.lake.continuous_aggregate import create_metrics_table
from icestream.lake.demo_tables import demo_mark
from icestream.lake.statement import Statement
from icestream.lake.table import LakeTable, setup_tables
from icestream.producer.put import produce
from icestream.synthetic.generator import backfill_config, generate

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

    from icestream.config import Settings

DEMO_SUFFIX = METRICS_DEMO_SUFFIX
END = datetime(2026, 11, 21, tzinfo=UTC)  # the demo's hour of event time ends here (a fixed hour: runs read alike)


@dataclass(frozen=True)
class MetricsDemo:
    """What the demo sent, what its ingest did after each part, and the aggregate as it grew."""

    settings: Settings  # the demo's stream and events table (its metrics_table_name is the aggregate)
    parts: pd.DataFrame  # per part: records sent, batches, events written, groups, refresh seconds
    growth: pd.DataFrame  # per part and minute: events the metrics table held after that part
    progress: list[dict[str, Any]]  # every batch of every part


def demo_settings(settings: Settings) -> Settings:
    """The demo's stream ``<stream>-metrics`` and events table ``<table>_metrics_demo``."""
    return replace(settings.companion(DEMO_SUFFIX), stream_name=f"{settings.stream_name}-metrics")


def metrics_stream_demo(
    spark: SparkSession,
    settings: Settings,
    records: int = 3_000,
    parts: int = 3,
    seed: int = 17,
    timeout: float = 600.0,
) -> MetricsDemo | None:
    """Send an hour of events in ``parts`` and ingest each part with the metrics kept (see the module docstring).

    Args:
        spark: The session.
        settings: The workbook's settings (see :func:`demo_settings` for the demo's names).
        records: Records to send in all (events, repeats, malformed).
        parts: How many parts they go in, each ingested before the next is sent.
        seed: The generator's seed.
        timeout: Seconds each part's ingest may take.

    Returns:
        The demo, or None (nothing sent) when Kinesis is not an emulator.
    """
    if not settings.is_local_endpoint:
        return None
    import pandas as pd

    demo = demo_settings(settings)
    client = start_afresh(spark, demo, DEMO_SUFFIX, others=(demo.metrics_table_name,))
    setup_tables(spark, demo, demo_mark(DEMO_SUFFIX))
    # Made here rather than by the ingest, so that it carries the demo's mark from its first commit.
    create_metrics_table(spark, demo.metrics_table_name, demo.table_name, demo_mark(DEMO_SUFFIX))
    generated, _ = generate(backfill_config(hours=1, records=records, end=END, seed=seed, late_rate=0.05))
    size = -(-len(generated) // parts)
    rows, growth, progress = [], [], []
    try:
        for part in range(parts):
            chunk = generated[part * size : (part + 1) * size]
            produce(demo, chunk, progress=False)  # within the emulator's write limits, retrying what it throttles
            query = start_ingest(
                spark,
                demo,
                available_now=True,
                trigger_seconds=0,
                metrics=True,
                max_records_per_shard=len(chunk),  # one batch a part: one MERGE
                progress_file=demo.path("run_dir") / f"{DEMO_SUFFIX}_progress.jsonl",
            )
            query.await_termination(timeout=timeout)
            batches = list(query.recent_progress)
            progress += batches
            per_minute = _per_minute(spark, demo.metrics_table_name)
            growth.append(per_minute.assign(part=part + 1))
            refresh_ms = sorted(batch["duration_ms"]["metrics"] for batch in batches)
            rows.append(
                {
                    "part": part + 1,
                    "records sent": len(chunk),
                    "batches": len(batches),
                    "events written": sum(batch["written"] for batch in batches),
                    "events in the metrics": int(per_minute["events"].sum()),
                    "minutes": len(per_minute),
                    "refresh ms (median)": round(refresh_ms[len(refresh_ms) // 2]) if refresh_ms else 0,
                }
            )
    finally:
        client.delete_stream(StreamName=demo.stream_name, EnforceConsumerDeletion=True)
    return MetricsDemo(demo, pd.DataFrame(rows).set_index("part"), pd.concat(growth, ignore_index=True), progress)


def _per_minute(spark: SparkSession, metrics: str) -> pd.DataFrame:
    """Events per minute the metrics table holds now (a recorded statement of that table)."""
    table = LakeTable(spark, metrics)
    statement = Statement(f"SELECT minute, sum(events) AS events FROM {table.name} GROUP BY minute ORDER BY minute")
    return table.run(statement).toPandas().astype({"events": "int64"})
