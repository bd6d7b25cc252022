"""``icestream maintain``: the scheduled table maintenance, one command for cron or a timer.

It runs :func:`icestream.lake.routine.run_maintenance` on the events table: compact closed hours,
rewrite manifests, expire snapshots (keeping the ingest's positions), remove orphan files. Each step
prints its SQL and one report line; ``--dry-run`` prints the same SQL without running it. A step that
fails prints ``error: <step>: <reason>`` and the command exits with status 1 after the other steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from datetime import timedelta

from icestream.cli.common import settings_from
from icestream.lake.maintenance import DEFAULT_ORPHAN_AGE
from icestream.lake.routine import DEFAULT_SNAPSHOT_AGE, STEPS, StepResult


def _days(age: timedelta) -> str:
    return f"{age.days}d"


def cmd_maintain(args: argparse.Namespace) -> int:
    """Run (or with ``--dry-run``, plan) the maintenance steps and print a report line per step."""
    from icestream.config import validate_identifier
    from icestream.lake import LakeTable
    from icestream.lake.routine import MaintenancePlan, parse_age, parse_steps, run_maintenance
    from icestream.spark import get_spark

    settings = settings_from(args)
    if args.table:
        settings = dataclasses.replace(settings, table=validate_identifier(args.table, "table"))
    plan = MaintenancePlan.scheduled(
        settings.stream_name,
        snapshot_age=parse_age(args.expire_older_than),
        orphan_age=parse_age(args.orphans_older_than),
        retain_last=args.retain_last,
        steps=parse_steps(args.steps),
    )
    table = LakeTable(get_spark(settings, app_name="icestream-maintain"), settings.table_name, dry_run=args.dry_run)
    print(
        f"{'dry run: ' if args.dry_run else ''}maintaining {table.name}: compact hours before "
        f"{plan.compact_before:%Y-%m-%d %H:%M} UTC, expire snapshots before {plan.expire_before:%Y-%m-%d %H:%M} "
        f"UTC (keeping the newest snapshot with the positions of {settings.stream_name}), "
        f"orphans before {plan.orphans_before:%Y-%m-%d %H:%M} UTC",
        flush=True,
    )

    def report(result: StepResult) -> None:
        if result.outcome is not None:
            print(f"-- {result.step}\n{result.outcome.statement};", flush=True)
        print(result.line(), flush=True)
        if result.error:
            print(f"error: {result.step}: {result.error}", file=sys.stderr, flush=True)

    results = run_maintenance(table, plan, on_step=report)
    return 0 if all(result.ok for result in results) else 1


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to the ``icestream`` parser."""
    maintain = commands.add_parser(
        "maintain", help="compact closed hours, rewrite manifests, expire snapshots, remove orphans (cron-friendly)"
    )
    maintain.add_argument("--dry-run", action="store_true", help="print the SQL each step would run; change nothing")
    maintain.add_argument("--table", help="events table to maintain (default: the table setting)")
    maintain.add_argument(
        "--steps", default=",".join(STEPS), help=f"comma-separated subset of {','.join(STEPS)} (default: all)"
    )
    maintain.add_argument(
        "--expire-older-than", default=_days(DEFAULT_SNAPSHOT_AGE), metavar="AGE",
        help="snapshots older than this may expire, e.g. 5d, 12h (default 5d, Iceberg's)",
    )  # fmt: skip
    maintain.add_argument(
        "--orphans-older-than", default=_days(DEFAULT_ORPHAN_AGE), metavar="AGE",
        help="remove unreferenced files older than this; at least 24h (default 3d, Iceberg's)",
    )  # fmt: skip
    maintain.add_argument(
        "--retain-last", type=int, default=1, help="always keep this many recent snapshots (more if positions need)"
    )
    maintain.set_defaults(handler=cmd_maintain)
