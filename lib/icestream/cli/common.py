"""What every command shares: the settings options, loading settings, and turning errors into one line."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime

from icestream.config import Settings, load_settings
from icestream.errors import IcestreamError


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings for a command's ``--config`` and ``--profile``."""
    return load_settings(config_file=args.config, **({"profile": args.profile} if args.profile else {}))


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """``--config`` and ``--profile``, shared with the job entry points (:mod:`icestream.jobs`)."""
    parser.add_argument("--config", help="YAML settings file (default: ICESTREAM_CONFIG or ./icestream.yaml)")
    parser.add_argument("--profile", help="local, localstack or aws (default: ICESTREAM_PROFILE or local)")


def run_handler(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command; an error a user can fix is printed as one line (exit status 2).

    A failure inside Spark is one line too: what failed and its root cause (``Permission denied``,
    a transform's exception); its Python and Java traces go to the driver's log file, named in the line.

    Args:
        handler: A ``cmd_*`` function.
        args: Its parsed arguments.

    Returns:
        The exit status.
    """
    try:
        return int(handler(args))
    except IcestreamError as error:
        print(f"error: {error}{_trace_kept(error, args)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if _spark_error(error) is None:
            raise
        from icestream.ingest.batch_retry import describe

        print(f"error: Spark failed: {describe(error)}.{_trace_kept(error, args)}", file=sys.stderr)
        return 2


def _spark_error(error: BaseException) -> BaseException | None:
    """The first Spark or Py4J error in ``error``'s chain of causes, or None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if type(current).__module__.split(".")[0] in ("py4j", "pyspark"):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _trace_kept(error: BaseException, args: argparse.Namespace) -> str:
    """Append ``error``'s whole trace to the driver's log file if Spark raised it; the words that say where."""
    if _spark_error(error) is None:
        return ""
    from icestream.runtime.spark import spark_log_file

    try:
        log_file = spark_log_file(settings_from(args))
        with log_file.open("a", encoding="utf-8") as log:
            log.write(f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} ERROR icestream: the command ended on\n")
            log.write("".join(traceback.format_exception(error)))
    except (OSError, IcestreamError):
        return ""  # the line alone, as before
    return f" Spark's whole trace: {log_file}"
