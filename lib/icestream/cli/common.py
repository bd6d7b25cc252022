"""What every command shares: the settings options, loading settings, and turning errors into one line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

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

    Args:
        handler: A ``cmd_*`` function.
        args: Its parsed arguments.

    Returns:
        The exit status.
    """
    try:
        return int(handler(args))
    except IcestreamError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
