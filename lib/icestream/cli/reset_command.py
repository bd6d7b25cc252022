"""``icestream reset``: drop the workbook's tables, recreate its stream, clear its run state."""

from __future__ import annotations

import argparse

from icestream.cli.common import settings_from


def cmd_reset(args: argparse.Namespace) -> int:
    """Show what a reset deletes; with ``--yes``, do it."""
    from icestream.runtime.spark import prepare_runtime, start_session
    from icestream.workbook.reset import apply_reset, plan_reset

    settings = settings_from(args)
    spark = start_session(prepare_runtime(settings), app_name="icestream-reset")
    plan = plan_reset(spark, settings)
    if not args.yes:
        print("icestream reset would:")
        for line in plan.describe():
            print(f"  {line}")
        print("Nothing was changed. Run `icestream reset --yes` (or `make reset YES=1`) to do it.")
        return 2
    for line in apply_reset(spark, settings, plan).describe():
        print(f"done: {line}")
    print("Next: notebook 00 (or `icestream setup`) creates the tables again.")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to the ``icestream`` parser."""
    reset = commands.add_parser(
        "reset", help="drop the workbook's tables, recreate the stream, clear run state (asks for --yes)"
    )
    reset.add_argument("--yes", action="store_true", help="really delete (without it: show what would go, exit 2)")
    reset.set_defaults(handler=cmd_reset)
