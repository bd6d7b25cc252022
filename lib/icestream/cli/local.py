"""``icestream emulator``, ``kafka``, ``setup`` and ``doctor``: the local pieces and the checks."""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from icestream.cli.common import settings_from
from icestream.config import COMPANION_SUFFIXES, DEMO_TABLE_SUFFIXES, EMULATOR_DUMMY_KEYS, Settings
from icestream.errors import IcestreamError
from icestream.stack import spark_line
from icestream.validation import check_writable_folders

if TYPE_CHECKING:
    from icestream.kafka.connection import KafkaConnection


def cmd_emulator(args: argparse.Namespace) -> int:
    """Start, stop or report the local Kinesis emulator (this run folder's, or the one found on its port)."""
    from icestream.errors import EmulatorError
    from icestream.kinesis.clients import local_emulator

    settings = settings_from(args)
    emulator = local_emulator(settings)
    found = emulator.status()
    elsewhere = (
        f"the Kinesis emulator at {found.endpoint} was started with another run folder (none is recorded in "
        f"{emulator.state_file})"
    )
    if args.action == "start":
        endpoint = emulator.start(port=args.port, write_limits=settings.emulator_write_limits)
        if found.found_on_port:
            print(f"notice: {elsewhere}; using it, as setup and ingest will.", file=sys.stderr, flush=True)
        print(endpoint)
        return 0
    if args.action == "stop":
        if found.found_on_port:  # only the folder that started it can tell that the process is ours
            raise EmulatorError(
                f"{elsewhere}; it was left running: stop it with that folder, ICESTREAM_RUN_DIR=<that folder> "
                f"icestream emulator stop (the default folder is {Settings.run_dir})."
            )
        print("stopped" if emulator.stop() else "not running")
        return 0
    pid = f" (pid {found.pid})" if found.pid else ""
    print(f"{found.detail}" + (f": {found.endpoint}{pid}" if found.endpoint else ""))
    return 0 if found.healthy else 1


def cmd_kafka(args: argparse.Namespace) -> int:
    """Start, stop or report the local Kafka broker (one KRaft node on loopback)."""
    from icestream.kafka.broker import Broker

    broker = Broker.from_settings(settings_from(args))
    if args.action == "start":
        started = broker.start(port=args.port)
        if started.already_running:
            print(f"already running: {started.bootstrap} (pid {started.pid}); stop it with `icestream kafka stop`")
        else:
            print(started.bootstrap)
        return 0
    if args.action == "stop":
        print("stopped" if broker.stop() else "not running")
        return 0
    status = broker.status()
    print(f"{status.detail}" + (f": {status.bootstrap} (pid {status.pid})" if status.bootstrap else ""))
    return 0 if status.healthy else 1


def workbook_suffixes() -> tuple[str, ...]:
    """Every suffix the workbook appends to the table's name: its companions, the demos' tables and theirs."""
    return (*COMPANION_SUFFIXES, *DEMO_TABLE_SUFFIXES)


def cmd_setup(args: argparse.Namespace) -> int:
    """Create the stream (and with ``--kafka`` the topic), the namespace and the tables (idempotent), once the
    names and shards are checked."""
    from icestream.kinesis.clients import check_shard_count, ensure_stream, waiting_for_kinesis
    from icestream.lake.table import setup_tables
    from icestream.runtime.spark import prepare_runtime, start_session

    settings = settings_from(args)
    # Everything a user can get wrong is refused before the stream exists: setup creates it first.
    if args.shards is not None:
        check_shard_count(args.shards, "--shards")
    settings.check_companion_names(workbook_suffixes())
    check_writable_folders(settings)
    connection = None
    if args.kafka:
        from icestream.kafka.connection import kafka_connection

        connection = kafka_connection(settings)  # no broker is refused here, before the stream is made
    print(waiting_for_kinesis(settings), flush=True)  # at once: an endpoint that never answers is said before it
    summary = ensure_stream(settings, shard_count=args.shards)
    print(f"stream {settings.stream_name}: {summary['StreamStatus']}, {summary['OpenShardCount']} open shards")
    notice = _shards_not_applied(settings, args.shards, int(summary["OpenShardCount"]))
    if notice:
        print(f"notice: {notice}", file=sys.stderr, flush=True)
    if connection is not None:
        _setup_topic(connection, settings, args.shards)
    spark = start_session(prepare_runtime(settings, creates_namespace=True))  # setup makes the Glue database
    for table in setup_tables(spark, settings):
        print(f"table {table.name}: ready")
    return 0


def _shards_not_applied(settings: Settings, shards: int | None, open_shards: int) -> str:
    """What to say when the stream exists with other shards than asked for ('' when nothing was asked, or matches).

    ``--shards`` and the ``shard_count`` setting make a new stream; an existing one keeps its shards, which
    setup had done without a word. A shard count is asked for when ``--shards`` is given or the setting is set.
    """
    from icestream.kinesis.clients import resolve_endpoint
    from icestream.validation import ENV_PREFIX

    if shards is not None:
        asked = f"--shards {shards}"
    elif "shard_count" in settings.sources:
        shards, asked = settings.shard_count, f"{ENV_PREFIX}SHARD_COUNT / shard_count {settings.shard_count}"
    else:
        return ""
    if shards == open_shards:
        return ""
    command = (
        f"aws kinesis update-shard-count --stream-name {settings.stream_name} --target-shard-count {shards} "
        f"--scaling-type UNIFORM_SCALING --region {settings.region}"
    )
    endpoint = resolve_endpoint(settings)
    if endpoint:
        command += f" --endpoint-url {endpoint}"
    if settings.is_local_endpoint:  # an emulator takes its dummy keys: a user's own have no business there
        access_key, secret_key = EMULATOR_DUMMY_KEYS[settings.profile]
        command = f"AWS_ACCESS_KEY_ID={access_key} AWS_SECRET_ACCESS_KEY={secret_key} {command}"
    return (
        f"stream {settings.stream_name} exists with {open_shards} open shards; {asked} was not applied (it sets a new "
        f"stream's shards). To reshard it, keeping its records, use Kinesis's UpdateShardCount: `{command}` (the "
        "ingest follows the new shards); `icestream reset` would recreate it with the shards it has."
    )


def _setup_topic(connection: KafkaConnection, settings: Settings, shards: int | None) -> None:
    """Create the Kafka topic with the stream's shard count as partitions unless it exists; one line says which.

    An existing topic keeps its partitions, as a stream keeps its shards: fewer than ``--shards`` (or a
    ``shard_count`` set) asked for is said in one notice, never changed here.
    """
    from icestream.kafka.topics import ensure_topic, partitions
    from icestream.validation import ENV_PREFIX

    wanted = shards if shards is not None else settings.shard_count
    made = ensure_topic(connection, wanted)
    # A topic just made has the partitions asked for; its metadata may reach a broker's cache a moment later.
    count = wanted if made else len(partitions(connection))
    state = "created" if made else "exists"
    print(f"topic {connection.topic}: {state}, {count} partitions on {connection.bootstrap}", flush=True)
    if shards is not None:
        asked = f"--shards {shards}"
    elif "shard_count" in settings.sources:
        asked = f"{ENV_PREFIX}SHARD_COUNT / shard_count {settings.shard_count}"
    else:
        return
    if count < wanted:
        print(
            f"notice: topic {connection.topic} exists with {count} partitions; {asked} was not applied (it sets a new "
            f"topic's partitions). To grow it, keeping its records: `kafka-topics.sh --bootstrap-server "
            f"{connection.bootstrap} --alter --topic {connection.topic} --partitions {wanted}` (or "
            "icestream.kafka.topics.add_partitions); keys hash to the new partitions from then on, so a user's next "
            "records may land in another partition than its earlier ones.",
            file=sys.stderr,
            flush=True,
        )


def _doctor_checks(settings: Settings, start_spark: bool) -> list[tuple[str, Callable[[], str]]]:
    from icestream.kinesis.clients import CHECK_ATTEMPTS, check_kinesis, waiting_for_kinesis
    from icestream.runtime.catalog import describe_catalog
    from icestream.runtime.jars import iceberg_plan, sqlite_jdbc_driver
    from icestream.runtime.platforms import AWS_CLASSES, session_versions, unsupported_spark_reason
    from icestream.runtime.shipping import check_executors
    from icestream.runtime.spark import check_java, get_spark

    def python() -> str:
        if sys.version_info[:2] != (3, 11):
            raise IcestreamError(
                f"Python {platform.python_version()}; this project pins Python 3.11 (make run creates .venv)."
            )
        return f"Python {platform.python_version()} at {sys.executable}"

    def spark_version() -> str:
        try:
            version = importlib.metadata.version("pyspark")
        except importlib.metadata.PackageNotFoundError:  # EMR and Glue put pyspark on the path, not pip
            import pyspark

            version = pyspark.__version__
        reason = unsupported_spark_reason(version)
        if reason is not None:
            raise IcestreamError(f"pyspark {version}: {reason}")
        line = spark_line(".".join(version.split(".")[:2]))
        if settings.spark_line and settings.spark_line != line.name:
            raise IcestreamError(
                f"pyspark {version} is installed, but ICESTREAM_SPARK_LINE={settings.spark_line} asks for the "
                f"Spark {settings.spark_line} line: run `make clean setup` to install it, or unset the setting."
            )
        return f"pyspark {version} (the Spark {line.name} line: Iceberg {line.iceberg}, Scala {line.scala})"

    def jars() -> str:
        plan = iceberg_plan(settings)
        where = ", ".join(str(path) for path in plan.jars) or ", ".join(plan.packages) or "; ".join(plan.notes)
        return f"Iceberg {settings.iceberg_version} jars ({plan.source}): {where}"

    def catalog() -> str:
        if settings.catalog_type != "jdbc":
            return describe_catalog(settings)
        jar, natives = sqlite_jdbc_driver(settings)
        return f"{describe_catalog(settings)}; driver {jar}" + (f", natives in {natives[0]}" if natives else "")

    def kinesis() -> str:
        print(f"{'':<5}{'kinesis':<9} {waiting_for_kinesis(settings, CHECK_ATTEMPTS)}", flush=True)
        return check_kinesis(settings)

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

    def platform_row() -> str:
        found = session_versions(get_spark(settings, app_name="icestream-doctor"))
        problems = [line for line in found.warnings() if not line.startswith("Iceberg ")]  # that one falls back
        if problems:
            raise IcestreamError(f"{found.line()}; " + "; ".join(problems))
        notes = [line for line in found.warnings() if line.startswith("Iceberg ")]
        return "; ".join([found.line(), *notes])

    def aws_classes() -> str:
        found = session_versions(get_spark(settings, app_name="icestream-doctor"))
        needed = settings.catalog_type == "glue" or settings.warehouse_uri.startswith("s3")
        if found.missing_classes and needed:
            raise IcestreamError(
                f"the driver cannot load {', '.join(found.missing_classes)}: add the platform's Iceberg AWS "
                "bundle (EMR, Glue provide it) or iceberg-aws-bundle to spark.jars"
            )
        loaded = [name.rsplit(".", 1)[1] for name in AWS_CLASSES if name not in found.missing_classes]
        missing = [name.rsplit(".", 1)[1] for name in found.missing_classes]
        return f"loads {', '.join(loaded) or 'none'}" + (
            f"; not {', '.join(missing)} (not needed by the {settings.profile} profile)" if missing else ""
        )

    checks = [
        ("python", python),
        ("java", check_java),
        ("spark", spark_version),
        ("iceberg", jars),
        ("catalog", catalog),
        ("settings", profile),
        ("kinesis", kinesis),
    ]
    if start_spark:
        checks += [("session", spark), ("platform", platform_row), ("aws", aws_classes), ("executors", executors)]
    return checks


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check Java, Spark, the Iceberg jars, the settings and the Kinesis endpoint."""
    try:
        settings = settings_from(args)
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


def cmd_lab(args: argparse.Namespace) -> int:
    """Start JupyterLab on 127.0.0.1, on notebooks/, as root or not (replaces this process)."""
    import os

    from icestream.config import project_home
    from icestream.workbook.lab import lab_command, write_overrides

    write_overrides()
    command = lab_command(project_home(), port=args.port)
    print(
        ">> JupyterLab: open the http://127.0.0.1:...?token=... address printed below; Ctrl-C twice stops it",
        flush=True,
    )
    os.execv(command[0], command)  # noqa: S606 - JupyterLab takes over the terminal and its Ctrl-C
    return 0  # not reached: the process is JupyterLab now


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to the ``icestream`` parser."""
    emulator = commands.add_parser("emulator", help="the local Kinesis emulator")
    emulator.add_argument("action", choices=("start", "stop", "status"))
    emulator.add_argument(
        "--port",
        type=int,
        help=f"loopback port for start (default: the emulator_port setting, {Settings.emulator_port})",
    )
    emulator.set_defaults(handler=cmd_emulator)

    kafka = commands.add_parser("kafka", help="the local Kafka broker (one KRaft node on 127.0.0.1)")
    kafka.add_argument("action", choices=("start", "stop", "status"))
    kafka.add_argument(
        "--port", type=int, help="loopback port of the broker's listener for start (default: a free one)"
    )
    kafka.set_defaults(handler=cmd_kafka)

    setup = commands.add_parser("setup", help="create the stream, namespace and tables (idempotent)")
    setup.add_argument("--shards", type=int, help="shards for a new stream (default: settings.shard_count)")
    setup.add_argument(
        "--kafka",
        action="store_true",
        help="also create the Kafka topic (kafka_topic) with --shards partitions (kafka_bootstrap or the local broker)",
    )
    setup.set_defaults(handler=cmd_setup)

    doctor = commands.add_parser("doctor", help="check Java, Spark, jars, settings and the endpoint")
    doctor.add_argument("--quick", action="store_true", help="skip starting a Spark session")
    doctor.set_defaults(handler=cmd_doctor)

    lab = commands.add_parser("lab", help="JupyterLab on 127.0.0.1, opening on notebooks/ (root or not)")
    lab.add_argument("--port", type=int, help="loopback port (default: 8888 or the next free one)")
    lab.set_defaults(handler=cmd_lab)
