"""``icestream ingest`` and ``ship`` to a standalone cluster: the streaming ingest, here or on a cluster."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icestream.cli.common import settings_from
from icestream.errors import IcestreamError
from icestream.limits import SCHEMA_EVOLUTION_MODES, START_POSITIONS

if TYPE_CHECKING:
    from icestream.config import Settings


def cmd_ship(args: argparse.Namespace) -> int:
    """Build what executors need and print the matching ``spark-submit`` line (or the requirements)."""
    import dataclasses

    from icestream.runtime import shipping
    from icestream.runtime.jars import resolve_jars

    if args.requirements:
        print("\n".join(shipping.pinned_requirements()))
        return 0
    settings = settings_from(args)
    if getattr(args, "packages", False):
        print("\n".join(packages_lines(settings)))
        return 0
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


def packages_lines(settings: Settings) -> list[str]:
    """The JVM packages of the installed Spark line as a ``--packages`` line and as ``spark.jars.packages``."""
    from icestream.runtime.jars import maven_excludes, maven_packages
    from icestream.stack import spark_line

    packages = ",".join(maven_packages(settings))
    excludes = ",".join(maven_excludes(settings))
    lines = [
        f"# Spark {spark_line().name}, catalog {settings.catalog_type}: the JVM packages of lib/icestream/stack.toml",
        f"--packages {packages}",
        f"--conf spark.jars.packages={packages}",
    ]
    if excludes:  # what the packages pull in that Maven Central does not serve (stack.toml says why)
        lines += [f"--exclude-packages {excludes}", f"--conf spark.jars.excludes={excludes}"]
    return lines


def _progress_line(progress: dict[str, Any]) -> str:
    """One batch: its counts (with the event times cut to microseconds, when there are any), its time and
    the phases that took a tenth of it or more, how far the stream is behind, and the driver's heap
    (used / max), so a run shows where time and memory go."""
    behind = progress["millis_behind_latest"]
    lag = "-" if behind is None else f"{behind / 1000:.1f} s"
    durations = progress["duration_ms"]
    total = durations["total"]
    phases = ", ".join(
        f"{phase} {ms / 1000:.2f}" for phase, ms in durations.items() if phase != "total" and ms >= total / 10
    )
    heap = progress.get("driver_heap_mib")
    memory = f"  heap {heap['used']:.0f}/{heap['max']:.0f} MiB" if heap else ""
    cut = progress.get("event_times_cut", 0)
    times_cut = f"{cut} times cut to µs  " if cut else ""
    return (
        f"batch {progress['batch_id']:>5}: read {progress['num_input_rows']:>6}  written {progress['written']:>6}  "
        f"rejected {progress['rejected']:>4}  deduplicated {progress['deduplicated']:>4}  {times_cut}"
        f"{total / 1000:6.2f} s ({phases})  behind {lag}{memory}"
    )


def ingest_options_from(args: argparse.Namespace) -> dict[str, Any]:
    """The ingest options the command line gives (fields of ``IngestOptions``).

    Raises:
        IcestreamError: For a value the options cannot take (a bad time, a transform that does not load).
    """
    from datetime import datetime

    from icestream.ingest.changes import ChangeSpec
    from icestream.ingest.options import parse_trigger
    from icestream.ingest.transform import load_transform

    options: dict[str, Any] = {
        "source": args.source,
        "fail_on_data_loss": not args.no_fail_on_data_loss,
        "trigger_seconds": parse_trigger(args.trigger),
        "available_now": args.available_now,
        "max_batches": args.max_batches,
        "duration_seconds": args.duration,
        "starting_position": args.starting_position,
        "max_records_per_shard": args.max_records_per_shard,
        "shards_per_task": args.shards_per_task,
        "max_records_per_batch": args.max_records_per_batch,
        "dedupe": False if args.no_dedupe else None,  # None: on for events, off for changes
        "archive": True if args.archive else None,  # None: the archive_raw setting
        "metrics": True if args.metrics else None,  # None: the metrics setting
        "on_progress": None if args.quiet else lambda progress: print(_progress_line(progress), flush=True),
        "min_records": args.min_records,
        "schema_evolution": args.schema_evolution,  # None: the schema_evolution setting
    }
    if args.pause_at:
        from icestream.ingest.crash_drill import parse_pause, pause_hook

        options["fault_hook"] = pause_hook(*parse_pause(args.pause_at), seconds=args.pause_seconds)
    if args.max_trigger_delay is not None:
        if args.min_records is None:
            raise IcestreamError("--max-trigger-delay bounds how long --min-records holds a batch back: give both.")
        options["max_trigger_delay_seconds"] = parse_trigger(args.max_trigger_delay)
    if args.transform:
        options["transform"] = load_transform(args.transform)  # before Spark starts: a typo fails at once
    routing = {
        "route": args.route,
        "route_tables": args.route_map,
        "route_default": args.route_default,
        "route_unknown": args.route_unknown,
    }
    options["routing"] = {name: value for name, value in routing.items() if value is not None}
    if args.changes or args.key or args.order or args.change_format or args.op_field:
        settings = settings_from(args)
        options["changes"] = ChangeSpec.parse(
            args.changes or settings.changes_columns or "",
            args.key or settings.changes_key or "",
            args.order or settings.changes_order,
            args.change_format or settings.changes_format,
            args.op_field or settings.changes_op_field,
        )
    if args.starting_timestamp:
        try:
            options["starting_timestamp"] = datetime.fromisoformat(args.starting_timestamp)
        except ValueError:
            raise IcestreamError(f"--starting-timestamp {args.starting_timestamp!r} is not ISO-8601.") from None
    return options


def cmd_ingest(args: argparse.Namespace) -> int:
    """Run the streaming ingest in the foreground until it stops (Ctrl-C or SIGTERM: graceful)."""
    import signal

    from icestream.ingest.query import start_ingest

    settings = settings_from(args)
    options = ingest_options_from(args)
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


def add_ingest_options(ingest: argparse.ArgumentParser) -> None:
    """The options of ``icestream ingest``, shared with the job entry point (:mod:`icestream.jobs.ingest`)."""
    ingest.add_argument(
        "--trigger",
        default="5s",
        help="processing-time trigger, 200ms to 1m (default 5s); --available-now runs its batches back to back",
    )
    ingest.add_argument(
        "--source",
        choices=("kinesis", "kafka"),
        default="kinesis",
        help="kinesis: the stream the settings name; kafka: their kafka_topic, read by Spark's Kafka source",
    )
    ingest.add_argument(
        "--no-fail-on-data-loss",
        action="store_true",
        help="kafka: skip records retention deleted before they were read (counted as lost) instead of stopping",
    )
    ingest.add_argument("--available-now", action="store_true", help="read what the stream holds now, commit, stop")
    ingest.add_argument("--duration", type=float, help="stop after this many seconds")
    ingest.add_argument("--max-batches", type=int, help="stop after this many batches")
    ingest.add_argument(
        "--starting-position",
        default=None,
        choices=START_POSITIONS,
        help="where shards with no committed position start (default: the start_position setting, trim_horizon)",
    )
    ingest.add_argument("--starting-timestamp", help="ISO-8601 time, with --starting-position at_timestamp")
    ingest.add_argument(
        "--max-records-per-shard",
        type=int,
        default=None,
        help="per batch (default: 100000, ten GetRecords answers; at the stream's tip a batch takes what is there)",
    )
    ingest.add_argument(
        "--max-records-per-batch",
        type=int,
        default=None,
        metavar="N",
        help="over all shards, what a batch keeps in memory (default: 250000; each shard's share is N / shards)",
    )
    ingest.add_argument(
        "--shards-per-task",
        type=int,
        default=None,
        metavar="N",
        help="shards one read task reads, side by side (default: spread over as many tasks as Spark runs at once)",
    )
    ingest.add_argument(
        "--min-records",
        type=int,
        default=None,
        metavar="N",
        help="a trigger runs a batch once N Kinesis records wait (fewer, larger files; default: off, one is enough)",
    )
    ingest.add_argument(
        "--max-trigger-delay",
        default=None,
        metavar="TIME",
        help="with --min-records: after this long since the last batch one record is enough (default 15m)",
    )
    ingest.add_argument("--no-dedupe", action="store_true", help="keep duplicate event ids")
    ingest.add_argument("--quiet", action="store_true", help="no line per batch")
    ingest.add_argument(
        "--archive",
        action="store_true",
        help="also keep every record as received in <table>_raw (default: the archive_raw setting)",
    )
    ingest.add_argument(
        "--metrics",
        action="store_true",
        help="also keep <table>_metrics (real_time_metrics per minute, type and device) current after every batch",
    )
    ingest.add_argument(
        "--transform",
        metavar="MODULE:FUNCTION",
        help="function DataFrame -> DataFrame run on each batch's events; rows given a reject_reason go to rejects",
    )
    ingest.add_argument(
        "--route",
        metavar="FIELD|MODULE:FUNCTION",
        help="send each event to the table its route names: <table>_<value> (default: the route setting; none)",
    )
    ingest.add_argument(
        "--route-map",
        metavar="VALUE=SUFFIX,...",
        help="with --route: value -> <table>_<suffix>; other values are unknown (default: the route_tables setting)",
    )
    ingest.add_argument("--route-default", metavar="SUFFIX", help="the table of unknown values (default: <table>)")
    ingest.add_argument(
        "--route-unknown",
        choices=("default", "reject"),
        default=None,
        help="an unknown value goes to the default table or to the rejects table (default: default)",
    )
    changes = ingest.add_argument_group(
        "change data", "a stream of creates, updates and deletes by key, kept as a keyed table (docs/ingest.md)"
    )
    changes.add_argument(
        "--changes",
        metavar="COLUMNS",
        help="the keyed table's columns, e.g. 'order_id bigint, status string, version bigint' (default: the "
        "changes_columns setting; none: an event stream)",
    )
    changes.add_argument("--key", metavar="COLUMN[,COLUMN]", help="with --changes: the key (default: changes_key)")
    changes.add_argument("--order", metavar="COLUMN", help="with --changes: its newer value wins")
    changes.add_argument("--change-format", choices=("flat", "debezium"), help="with --changes (default: flat)")
    changes.add_argument("--op-field", metavar="FIELD", help="with --changes, flat: the operation field")
    ingest.add_argument(
        "--schema-evolution",
        choices=SCHEMA_EVOLUTION_MODES,
        default=None,
        help="new top-level payload fields become columns; add-and-widen also widens int/float "
        "(default: the schema_evolution setting, off: they stay in properties)",
    )
    drill = ingest.add_argument_group(
        "crash drill", "hold a batch at one moment so that it can be killed there (docs/ingest.md; off by default)"
    )
    drill.add_argument(
        "--pause-at",
        metavar="PHASE[:N]",
        help="pause the N-th batch of this process (default 1) at before_read, after_read, between_commits or "
        "after_commit, after printing 'paused at ...'",
    )
    drill.add_argument(
        "--pause-seconds",
        type=float,
        default=60.0,
        metavar="S",
        help="with --pause-at: how long (at most 60, default 60); then the batch goes on",
    )


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to the ``icestream`` parser."""
    # `ship` (cmd_ship above for a standalone cluster) is registered by icestream.cli.ship with its platform targets.

    ingest = commands.add_parser("ingest", help="stream Kinesis into the Iceberg tables, exactly once")
    add_ingest_options(ingest)
    ingest.set_defaults(handler=cmd_ingest)
