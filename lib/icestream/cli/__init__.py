"""icestream's commands: emulator, kafka, setup, doctor, produce, ingest, load, ship, maintain, metrics, reset, run.

Each command lives in a module of this package with a ``register(commands)`` function; adding a
command is one module and one entry in :data:`COMMAND_MODULES`. Errors a user can cause are printed
as one line (``error: ...``) with what to do, exit status 2; a failed notebook exits with status 1
and names the notebook and cell.
"""

from __future__ import annotations

import argparse

from icestream.cli import (
    ingest_command,
    load_command,
    local,
    maintain,
    metrics_command,
    notebooks,
    produce,
    reset_command,
    ship,
)
from icestream.cli.common import add_common_options, run_handler

COMMAND_MODULES = (
    local,
    notebooks,
    produce,
    ingest_command,
    ship,
    load_command,
    maintain,
    metrics_command,
    reset_command,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and for the job entry points)."""
    parser = argparse.ArgumentParser(prog="icestream", description=__doc__.splitlines()[0])
    add_common_options(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``icestream`` console script."""
    args = build_parser().parse_args(argv)
    return run_handler(args.handler, args)
