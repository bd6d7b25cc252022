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
from icestream.errors import ConfigError, IcestreamError
from icestream.limits import START_POSITIONS


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
    from icestream.catalog import describe_catalog
    from icestream.clients import check_kinesis
    from icestream.jars import iceberg_plan, sqlite_jdbc_driver
    from icestream.shipping import check_executors
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
        plan = iceberg_plan(settings)
        where = ", ".join(str(path) for path in plan.jars) or ", ".join(plan.packages) or "; ".join(plan.notes)
        return f"Iceberg {settings.iceberg_version} jars ({plan.source}): {where}"

    def catalog() -> str:
        if settings.catalog_type != "jdbc":
            return describe_catalog(settings)
        jar, natives = sqlite_jdbc_driver(settings)
        return f"{describe_catalog(settings)}; driver {jar}" + (f", natives in {natives[0]}" if natives else "")

    def profile() -> str:
        return (
            f"profile {settings.profile}: table {settings.table_name}, stream {settings.stream_name}, "
            f"warehouse {settings.warehouse_uri}, master {settings.spark_master}"
        )

    def spark() -> str:
        session = get_spark(settings, app_name="icestream-doctor")  # also loads the Iceberg classes
        session.sql("SELECT 1").collect()
        return f"Spark {session.version} on {session.sparkContext.master} with the Iceberg catalog {settings.catalog!r}"

    def executors() -> str:
        return check_executors(get_spark(settings, app_name="icestream-doctor"), settings)

    checks = [
        ("python", python),
        ("java", check_java),
        ("spark", spark_version),
        ("iceberg", jars),
        ("catalog", catalog),
        ("settings", profile),
        ("kinesis", lambda: check_kinesis(settings)),
    ]
    if start_spark:
        checks += [("session", spark), ("executors", executors)]
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


def cmd_produce(args: argparse.Namespace) -> int:
    """Generate records and send them: live (default), a history backfill, a file; or in the background.

    The first line says what is sent, at what rate and why; the last one where every record went
    (see :mod:`icestream.producer.plan` for what ``--count`` and ``--rate`` mean in each mode).
    """
    import json
    import secrets

    from icestream.clients import kinesis_client
    from icestream.producer import background
    from icestream.producer.plan import live_rate, plan_production
    from icestream.producer.put import producer_client
    from icestream.producer.run import run_production, run_summary_path

    overrides = {"stream_name": args.stream} if args.stream else {}
    if args.profile:
        overrides["profile"] = args.profile
    settings = load_settings(config_file=args.config, **overrides)
    if args.stop:
        print("stopped" if background.stop_background_producer(settings) else "not running")
        return 0
    if args.status:
        status = background.background_producer_status(settings)
        print(status.detail + (f" (pid {status.pid}, log {status.log})" if status.pid else ""))
        if status.summary:
            print(json.dumps(status.summary.producer.table()))
        return 0
    seed = args.seed if args.seed is not None else secrets.randbits(31)
    mix = {"bad_rate": args.bad_rate, "duplicate_rate": args.duplicate_rate, "late_rate": args.late_rate}
    if args.background:
        if args.from_file or args.backfill_hours:
            raise ConfigError("--background runs live production only; leave out --from-file and --backfill-hours.")
        rate, why = live_rate(kinesis_client(settings), settings.stream_name, args.count, args.rate)
        status = background.start_background_producer(
            settings, rate=rate, duration=args.duration, count=args.count, seed=seed,
            anomalies=args.anomalies or "none", **mix,
        )  # fmt: skip
        print(f"background producer started (pid {status.pid}) at {rate:,.0f} records/s ({why}); {status.detail}; "
              f"log {status.log}")  # fmt: skip
        return 0
    client = producer_client(settings)  # before the plan: a live window starts when it is planned
    plan = plan_production(settings, seed=seed, mix=mix, count=args.count, rate=args.rate, duration=args.duration,
                           from_file=Path(args.from_file) if args.from_file else None,
                           backfill_hours=args.backfill_hours, anomalies=args.anomalies, client=client)  # fmt: skip
    print(plan.description, flush=True)
    summary = run_production(
        settings,
        plan.records,
        mode=plan.mode,
        generator=plan.generator,
        client=client,
        progress=not args.no_progress,
        total=args.count,
        summary_file=Path(args.summary_file) if args.summary_file else None,
        stop_on_sigterm=True,
        **plan.options,
    )
    print(f"{plan.mode}: {summary.producer.line()}; summary in {run_summary_path(settings, plan.mode)}")
    if summary.ground_truth is not None:
        print(f"seed {summary.seed}; ground truth of {len(summary.anomalies)} anomalies in {summary.ground_truth}")
    return 1 if summary.producer.failed else 0


def cmd_ship(args: argparse.Namespace) -> int:
    """Build what executors need and print the matching ``spark-submit`` line (or the requirements)."""
    import dataclasses

    from icestream import shipping
    from icestream.jars import resolve_jars

    if args.requirements:
        print("\n".join(shipping.pinned_requirements()))
        return 0
    settings = _settings(args)
    master = "spark://HOST:7077" if settings.local_master else settings.spark_master
    plan = shipping.ship_plan(dataclasses.replace(settings, spark_master=master))
    for artifact in plan.artifacts:
        print(f"ships {artifact} ({artifact.stat().st_size / 2**20:.1f} MiB)")
    jars = resolve_jars(settings)
    iceberg = ["--jars", ",".join(map(str, jars.jars))] if jars.jars else []
    iceberg += ["--packages", ",".join(jars.packages)] if jars.packages else []
    job = Path(shipping.PACKAGE) / "jobs" / "ingest.py"
    command = ["spark-submit", "--master", master, *iceberg, *shipping.submit_arguments(plan), str(job)]
    print(f"ICESTREAM_SHIP={settings.ship}; submit the ingest job with:\n  " + " ".join([*command, "--available-now"]))
    return 0


def _progress_line(progress: dict[str, Any]) -> str:
    behind = progress["millis_behind_latest"]
    lag = "-" if behind is None else f"{behind / 1000:.1f} s"
    return (
        f"batch {progress['batch_id']:>5}: read {progress['num_input_rows']:>6}  written {progress['written']:>6}  "
        f"rejected {progress['rejected']:>4}  deduplicated {progress['deduplicated']:>4}  "
        f"{progress['duration_ms']['total'] / 1000:6.2f} s  behind {lag}"
    )


def cmd_ingest(args: argparse.Namespace) -> int:
    """Run the streaming ingest in the foreground until it stops (Ctrl-C or SIGTERM: graceful)."""
    import signal
    from datetime import datetime

    from icestream.ingest import parse_trigger, start_ingest

    settings = _settings(args)
    options: dict[str, Any] = {
        "trigger_seconds": parse_trigger(args.trigger),
        "available_now": args.available_now,
        "max_batches": args.max_batches,
        "duration_seconds": args.duration,
        "starting_position": args.starting_position,
        "max_records_per_shard": args.max_records_per_shard,
        "dedupe": not args.no_dedupe,
        "on_progress": None if args.quiet else lambda progress: print(_progress_line(progress), flush=True),
    }
    if args.starting_timestamp:
        try:
            options["starting_timestamp"] = datetime.fromisoformat(args.starting_timestamp)
        except ValueError:
            raise IcestreamError(f"--starting-timestamp {args.starting_timestamp!r} is not ISO-8601.") from None
    query = start_ingest(settings=settings, **options)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: query.stop(timeout=0))
    query.await_termination()
    batches = list(query.recent_progress)
    totals = {
        key: sum(batch[key] for batch in batches) for key in ("num_input_rows", "written", "rejected", "deduplicated")
    }
    print(
        f"stopped after {len(batches)} batch(es): read {totals['num_input_rows']}, written {totals['written']}, "
        f"rejected {totals['rejected']}, deduplicated {totals['deduplicated']}; progress in {query.progress_file}"
    )
    return 0


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """``--config`` and ``--profile``, shared with the job entry points (:mod:`icestream.jobs`)."""
    parser.add_argument("--config", help="YAML settings file (default: ICESTREAM_CONFIG or ./icestream.yaml)")
    parser.add_argument("--profile", help="local, localstack or aws (default: ICESTREAM_PROFILE or local)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and for later subcommands)."""
    parser = argparse.ArgumentParser(prog="icestream", description=__doc__.splitlines()[0])
    add_common_options(parser)
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

    produce = commands.add_parser("produce", help="generate events and send them to Kinesis (live, backfill, file)")
    produce.add_argument(
        "--count", type=int, help="records to send, exactly (events, duplicates and malformed ones; file: lines)"
    )
    produce.add_argument(
        "--rate",
        type=float,
        help="records/s: live, the pace (default: the write limit with --count, 50 with --duration); "
        "backfill and file, a cap (default none)",
    )
    produce.add_argument("--duration", type=float, help="live: seconds to run (or --count); backfill, file: a cap")
    produce.add_argument("--from-file", help="send a JSON-lines file of payloads as they are")
    produce.add_argument("--backfill-hours", type=float, help="history mode: event times over the last N hours")
    produce.add_argument("--anomalies", help="'default', 'none' or e.g. spike:search:4,drop:add_to_cart:0.1@60+15")
    produce.add_argument("--bad-rate", type=float, default=0.005, help="malformed records per event (default 0.005)")
    produce.add_argument("--duplicate-rate", type=float, default=0.01, help="share of events sent twice (default 0.01)")
    produce.add_argument("--late-rate", type=float, default=0.02, help="share of events sent late (default 0.02)")
    produce.add_argument("--seed", type=int, help="generator seed (default: random; printed for reproduction)")
    produce.add_argument("--stream", help="stream name (default: settings)")
    produce.add_argument(
        "--summary-file", help="also write the JSON summary here (always in <run_dir>/produce_<mode>_summary.json)"
    )
    produce.add_argument("--no-progress", action="store_true", help="no progress bar")
    control = produce.add_mutually_exclusive_group()
    control.add_argument("--background", action="store_true", help="run live production detached, for --duration s")
    control.add_argument("--stop", action="store_true", help="stop the background producer")
    control.add_argument("--status", action="store_true", help="report the background producer")
    produce.set_defaults(handler=cmd_produce)

    ship = commands.add_parser("ship", help="build what cluster executors need; print the spark-submit line")
    ship.add_argument("--requirements", action="store_true", help="print the executors' pinned requirements")
    ship.set_defaults(handler=cmd_ship)

    ingest = commands.add_parser("ingest", help="stream Kinesis into the Iceberg tables, exactly once")
    add_ingest_options(ingest)
    ingest.set_defaults(handler=cmd_ingest)
    return parser


def add_ingest_options(ingest: argparse.ArgumentParser) -> None:
    """The options of ``icestream ingest``, shared with the job entry point (:mod:`icestream.jobs.ingest`)."""
    ingest.add_argument("--trigger", default="5s", help="processing-time trigger, e.g. 1s, 500ms (default 5s)")
    ingest.add_argument("--available-now", action="store_true", help="read what the stream holds now, commit, stop")
    ingest.add_argument("--duration", type=float, help="stop after this many seconds")
    ingest.add_argument("--max-batches", type=int, help="stop after this many batches")
    ingest.add_argument(
        "--starting-position", default=None, choices=START_POSITIONS,
        help="where shards with no committed position start (default: the start_position setting, trim_horizon)",
    )  # fmt: skip
    ingest.add_argument("--starting-timestamp", help="ISO-8601 time, with --starting-position at_timestamp")
    ingest.add_argument("--max-records-per-shard", type=int, default=10_000, help="per batch (default 10000)")
    ingest.add_argument("--no-dedupe", action="store_true", help="keep duplicate event ids")
    ingest.add_argument("--quiet", action="store_true", help="no line per batch")


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


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``icestream`` console script."""
    args = build_parser().parse_args(argv)
    return run_handler(args.handler, args)


if __name__ == "__main__":
    sys.exit(main())
