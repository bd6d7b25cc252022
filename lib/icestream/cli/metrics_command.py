"""``icestream metrics``: bring the continuous aggregate ``real_time_metrics`` up to date, once.

The ingest keeps ``<table>_metrics`` current by itself with ``--metrics``; this command is the
scheduled-job form (cron, a timer, an Airflow task) for an ingest that runs without it, and the way
to rebuild the table (``--rebuild``) or give it an Iceberg view (``--view``). It takes the metrics
table's lease, so it refuses to run beside an ingest that keeps the same table (see
:mod:`icestream.lake.continuous_aggregate`).
"""

from __future__ import annotations

import argparse
import dataclasses

from icestream.cli.common import settings_from


def cmd_metrics(args: argparse.Namespace) -> int:
    """Refresh (or rebuild) the metrics table, then print what it did."""
    from icestream.ingest.lease import Lease
    from icestream.lake.continuous_aggregate import (
        METRICS_HOLDER,
        create_metrics_table,
        create_metrics_view,
        refresh_metrics,
    )
    from icestream.lake.ddl import qualified_name
    from icestream.runtime.spark import prepare_runtime, start_session
    from icestream.validation import validate_identifier

    settings = settings_from(args)
    if args.table:
        settings = dataclasses.replace(settings, table=validate_identifier(args.table, "table"))
    spark = start_session(prepare_runtime(settings), app_name="icestream-metrics")
    metrics = create_metrics_table(spark, settings.metrics_table_name, settings.table_name)
    lease = Lease(spark, metrics, holder=METRICS_HOLDER)
    lease.acquire()
    try:
        refresh = refresh_metrics(spark, settings.table_name, metrics, rebuild=args.rebuild)
    finally:
        lease.release()
    print(f"{metrics}: {refresh.describe()}", flush=True)
    if args.view:
        view = qualified_name(settings.catalog, settings.namespace, validate_identifier(args.view, "view"))
        made = create_metrics_view(spark, metrics, view)
        print(f"view {made} reads {metrics}" if made else f"the {settings.catalog} catalog keeps no views: none made")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to the ``icestream`` parser."""
    metrics = commands.add_parser(
        "metrics", help="bring <table>_metrics (real_time_metrics per minute, type and device) up to date, once"
    )
    metrics.add_argument("--table", help="events table it follows (default: the table setting)")
    metrics.add_argument("--rebuild", action="store_true", help="recompute every row from the events table")
    metrics.add_argument(
        "--view",
        nargs="?",
        const="real_time_metrics",
        metavar="NAME",
        help="also create (or replace) an Iceberg view over it (default name real_time_metrics)",
    )
    metrics.set_defaults(handler=cmd_metrics)
