"""``icestream load``: JSON-lines files into the events and rejects tables, each file once."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from icestream.cli.common import settings_from


def cmd_load(args: argparse.Namespace) -> int:
    """Load files (local or Hadoop paths, gzip or not) through the stream's parser, rejects and dedupe."""
    from icestream.file_load.files import load_files
    from icestream.ingest.transform import load_transform
    from icestream.runtime.spark import prepare_runtime, start_session

    settings = settings_from(args)
    options: dict[str, Any] = {"dedupe_ids": not args.no_dedupe}
    if args.transform:
        options["transform"] = load_transform(args.transform)  # before Spark starts: a typo fails at once
    if args.dedupe_lookback is not None:
        from datetime import timedelta

        options["dedupe_lookback"] = timedelta(seconds=args.dedupe_lookback)
    spark = start_session(prepare_runtime(settings))
    result = load_files(spark, settings, args.paths, progress=not args.quiet and sys.stderr.isatty(), **options)
    reasons = ", ".join(f"{reason} {count}" for reason, count in result.reasons.items()) or "none"
    print(
        f"{result.files} file(s): {result.loaded} loaded, {result.skipped} already loaded; {result.lines} lines, "
        f"written {result.written}, rejected {result.rejected} (reasons: {reasons}), "
        f"deduplicated {result.deduplicated}"
    )
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to the ``icestream`` parser."""
    load = commands.add_parser("load", help="load JSON-lines files (gzip too) into the tables, each file once")
    load.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or globs; local or any Hadoop path")
    load.add_argument("--no-dedupe", action="store_true", help="keep duplicate event ids")
    load.add_argument("--dedupe-lookback", type=float, help="seconds of event time to compare ids in (default 3600)")
    load.add_argument("--transform", metavar="MODULE:FUNCTION", help="as for `icestream ingest`")
    load.add_argument("--quiet", action="store_true", help="no progress bar")
    load.set_defaults(handler=cmd_load)
