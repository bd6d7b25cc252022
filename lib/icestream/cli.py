"""The ``icestream`` command line: emulator, setup, doctor and the notebook runner.

Errors a user can cause are printed as one line (``error: ...``) with what to do, exit status 2;
a failed notebook exits with status 1 and names the notebook and cell.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from icestream.config import Settings, load_settings
from icestream.errors import IcestreamError


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(config_file=args.config, **({"profile": args.profile} if args.profile else {}))


def cmd_emulator(args: argparse.Namespace) -> int:
    """Start, stop or report the local Kinesis emulator."""
    from icestream.emulator import Emulator

    emulator = Emulator(_settings(args).path("run_dir"))
    if args.action == "start":
        print(emulator.start(port=args.port))
        return 0
    if args.action == "stop":
        print("stopped" if emulator.stop() else "not running")
        return 0
    status = emulator.status()
    print(f"{status.detail}" + (f": {status.endpoint} (pid {status.pid})" if status.endpoint else ""))
    return 0 if status.healthy else 1


def cmd_setup(args: argparse.Namespace) -> int:
    """Create the stream, the namespace and the tables (idempotent)."""
    from icestream.clients import ensure_stream
    from icestream.spark import get_spark
    from icestream.tables import setup_tables

    settings = _settings(args)
    summary = ensure_stream(settings, shard_count=args.shards)
    print(f"stream {settings.stream_name}: {summary['StreamStatus']}, {summary['OpenShardCount']} open shards")
    for name in setup_tables(get_spark(settings), settings):
        print(f"table {name}: ready")
    return 0


def _doctor_checks(settings: Settings, start_spark: bool) -> list[tuple[str, Callable[[], str]]]:
    from icestream.clients import check_kinesis
    from icestream.jars import resolve_jars
    from icestream.spark import check_java, get_spark

    def python() -> str:
        if sys.version_info[:2] != (3, 11):
            raise IcestreamError(
                f"Python {platform.python_version()}; this project pins Python 3.11 (make run creates .venv)."
            )
        return f"Python {platform.python_version()} at {sys.executable}"

    def spark_version() -> str:
        version = importlib.metadata.version("pyspark")
        if not version.startswith("3.5."):
            raise IcestreamError(f"pyspark {version}; this project needs 3.5.x. Run `make clean run`.")
        return f"pyspark {version}"

    def jars() -> str:
        plan = resolve_jars(settings)
        where = ", ".join(str(path) for path in plan.jars) or ", ".join(plan.packages)
        return f"Iceberg {settings.iceberg_version} jars ({plan.source}): {where}"

    def profile() -> str:
        return (
            f"profile {settings.profile}: table {settings.table_name}, stream {settings.stream_name}, "
            f"warehouse {settings.warehouse_uri}, master {settings.spark_master}"
        )

    def spark() -> str:
        session = get_spark(settings, app_name="icestream-doctor")  # also loads the Iceberg classes
        session.sql("SELECT 1").collect()
        return f"Spark {session.version} started with the Iceberg catalog {settings.catalog!r}"

    checks = [
        ("python", python),
        ("java", check_java),
        ("spark", spark_version),
        ("iceberg", jars),
        ("settings", profile),
        ("kinesis", lambda: check_kinesis(settings)),
    ]
    if start_spark:
        checks.append(("session", spark))
    return checks


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check Java, Spark, the Iceberg jars, the settings and the Kinesis endpoint."""
    try:
        settings = _settings(args)
    except IcestreamError as error:
        print(f"FAIL settings   {error}")
        return 1
    failures = 0
    for name, check in _doctor_checks(settings, start_spark=not args.quick):
        try:
            print(f"OK   {name:<9} {check()}", flush=True)
        except IcestreamError as error:
            failures += 1
            print(f"FAIL {name:<9} {error}", flush=True)
        except Exception as error:  # noqa: BLE001 - doctor reports every check, whatever breaks
            failures += 1
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            print(f"FAIL {name:<9} unexpected {type(error).__name__}: {first_line}", flush=True)
    return 1 if failures else 0


def _parameters(pairs: list[list[str]] | None) -> dict[str, Any]:
    # Values are read as YAML scalars, as papermill's -p does: 4 is an int, true a bool.
    return {name: yaml.safe_load(value) for name, value in (pairs or [])}


def cmd_run(args: argparse.Namespace) -> int:
    """Run notebooks headless with papermill."""
    from icestream.runner import NotebookFailedError, notebook_paths, run_notebooks

    settings = _settings(args)
    notebooks = notebook_paths(args.notebooks)
    output = Path(args.output) if args.output else settings.path("output_dir")
    try:
        runs = run_notebooks(notebooks, output, _parameters(args.parameter), progress=not args.no_progress)
    except NotebookFailedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print("\nwall time per notebook:")
    for run in runs:
        print(f"  {run.notebook:<32} {run.seconds:7.1f} s")
    print(f"  {'total':<32} {sum(run.seconds for run in runs):7.1f} s   (executed copies in {output})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and for later subcommands)."""
    parser = argparse.ArgumentParser(prog="icestream", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="YAML settings file (default: ICESTREAM_CONFIG or ./icestream.yaml)")
    parser.add_argument("--profile", help="local, localstack or aws (default: ICESTREAM_PROFILE or local)")
    commands = parser.add_subparsers(dest="command", required=True)

    emulator = commands.add_parser("emulator", help="the local Kinesis emulator")
    emulator.add_argument("action", choices=("start", "stop", "status"))
    emulator.add_argument("--port", type=int, help="loopback port for start (default: a free one)")
    emulator.set_defaults(handler=cmd_emulator)

    setup = commands.add_parser("setup", help="create the stream, namespace and tables (idempotent)")
    setup.add_argument("--shards", type=int, help="shards for a new stream (default: settings.shard_count)")
    setup.set_defaults(handler=cmd_setup)

    doctor = commands.add_parser("doctor", help="check Java, Spark, jars, settings and the endpoint")
    doctor.add_argument("--quick", action="store_true", help="skip starting a Spark session")
    doctor.set_defaults(handler=cmd_doctor)

    run = commands.add_parser("run", help="run notebooks headless with papermill")
    run.add_argument("notebooks", nargs="*", help="names or prefixes (default: all, in order)")
    run.add_argument(
        "-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), help="passed to every notebook"
    )
    run.add_argument("--output", help="folder for executed copies (default: output/)")
    run.add_argument("--no-progress", action="store_true", help="no per-cell progress bar")
    run.set_defaults(handler=cmd_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``icestream`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except IcestreamError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
