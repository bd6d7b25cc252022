"""``icestream maintain``: the scheduled table maintenance, one command for cron or a timer.

It runs :func:`icestream.lake.routine.run_maintenance` on the events table: compact closed hours,
rewrite manifests, expire snapshots (keeping the ingest's positions), remove orphan files; then the
``archive`` step applies the raw archive's retention (:func:`icestream.lake.archive.expire_archive`;
nothing when the ingest never ran with ``--archive``). Each step
prints its SQL and one report line; ``--dry-run`` prints the same SQL without running it. A step that
fails prints ``error: <step>: <reason>`` and the command exits with status 1 after the other steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

from icestream.cli.common import settings_from
from icestream.lake.maintenance import DEFAULT_ORPHAN_AGE
from icestream.lake.routine import DEFAULT_SNAPSHOT_AGE, STEPS, MaintenancePlan, StepResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icestream.config import Settings

ARCHIVE_STEP = "archive"  # the raw archive's retention, after the events table's steps


def _days(age: timedelta) -> str:
    return f"{age.days}d"


def _checked_plan(args: argparse.Namespace, settings: Settings) -> tuple[MaintenancePlan, set[str]]:
    """The plan and the step names, every step's arguments checked: a bad one fails before any step runs.

    ``--retain-last 0`` had failed in the expire step, after the compaction had rewritten the table.

    Raises:
        ConfigError: For an unknown step, a bad age, ``--retain-last`` or ``--archive-retention-days`` below 1.
    """
    from icestream.errors import ConfigError
    from icestream.lake.archive import check_retention_days
    from icestream.lake.maintenance import check_retain_last
    from icestream.lake.routine import parse_age, parse_steps

    names = {name.strip() for name in args.steps.split(",") if name.strip()}
    if not names or names - {*STEPS, ARCHIVE_STEP}:
        raise ConfigError(f"steps {args.steps!r}: choose from {', '.join((*STEPS, ARCHIVE_STEP))} (comma-separated).")
    check_retain_last(args.retain_last, "--retain-last")
    if args.archive_retention_days is not None:
        check_retention_days(args.archive_retention_days, "--archive-retention-days")
    table_steps = names - {ARCHIVE_STEP}
    plan = MaintenancePlan.scheduled(
        settings.stream_name,
        snapshot_age=parse_age(args.expire_older_than),
        orphan_age=parse_age(args.orphans_older_than),
        retain_last=args.retain_last,
        steps=parse_steps(",".join(table_steps)) if table_steps else (),
    )
    return plan, names


def cmd_maintain(args: argparse.Namespace) -> int:
    """Run (or with ``--dry-run``, plan) the maintenance steps and print a report line per step."""
    from icestream.lake.routine import run_maintenance
    from icestream.lake.table import LakeTable
    from icestream.runtime.spark import prepare_runtime, start_session
    from icestream.validation import validate_identifier

    settings = settings_from(args)
    if args.table:
        settings = dataclasses.replace(settings, table=validate_identifier(args.table, "table"))
    plan, names = _checked_plan(args, settings)
    spark = start_session(prepare_runtime(settings), app_name="icestream-maintain")
    table = LakeTable(spark, settings.table_name, dry_run=args.dry_run)
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

    results = run_maintenance(table, plan, on_step=report) if plan.steps else []
    ok = all(result.ok for result in results)
    if ARCHIVE_STEP in names:
        ok = _expire_archive(spark, settings, args) and ok
    return 0 if ok else 1


def _expire_archive(spark: SparkSession, settings: Settings, args: argparse.Namespace) -> bool:
    """The ``archive`` step: the raw archive's days past retention; False if it failed."""
    from icestream.lake.archive import expire_archive

    retention = settings.archive_retention_days if args.archive_retention_days is None else args.archive_retention_days
    try:
        expiry = expire_archive(spark, settings, retention_days=retention, dry_run=args.dry_run)
    except Exception as error:  # noqa: BLE001 - reported like the other steps' failures
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"{ARCHIVE_STEP:<10} FAILED: {reason}", flush=True)
        print(f"error: {ARCHIVE_STEP}: {reason}", file=sys.stderr, flush=True)
        return False
    print(expiry.line(), flush=True)
    return True


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to the ``icestream`` parser."""
    maintain = commands.add_parser(
        "maintain", help="compact closed hours, rewrite manifests, expire snapshots, remove orphans (cron-friendly)"
    )
    maintain.add_argument("--dry-run", action="store_true", help="print the SQL each step would run; change nothing")
    maintain.add_argument("--table", help="events table to maintain (default: the table setting)")
    maintain.add_argument(
        "--steps",
        default=",".join((*STEPS, ARCHIVE_STEP)),
        help=f"comma-separated subset of {','.join((*STEPS, ARCHIVE_STEP))} (default: all)",
    )
    maintain.add_argument(
        "--archive-retention-days",
        type=int,
        metavar="DAYS",
        help="days of arrival the raw archive keeps (default: the archive_retention_days setting, 30)",
    )
    maintain.add_argument(
        "--expire-older-than",
        default=_days(DEFAULT_SNAPSHOT_AGE),
        metavar="AGE",
        help="snapshots older than this may expire, e.g. 5d, 12h (default 5d, Iceberg's)",
    )
    maintain.add_argument(
        "--orphans-older-than",
        default=_days(DEFAULT_ORPHAN_AGE),
        metavar="AGE",
        help="remove unreferenced files older than this; at least 24h (default 3d, Iceberg's)",
    )
    maintain.add_argument(
        "--retain-last", type=int, default=1, help="always keep this many recent snapshots (more if positions need)"
    )
    maintain.set_defaults(handler=cmd_maintain)
