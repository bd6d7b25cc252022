"""Settings: one typed object built from defaults, a YAML file, the environment and arguments.

Precedence, lowest first: built-in defaults, the profile's defaults, an optional YAML file
(``ICESTREAM_CONFIG`` or ``icestream.yaml`` in the project folder), environment variables
named ``ICESTREAM_<SETTING>``, then explicit arguments (papermill parameters). Every value is
validated when settings load, so a bad value fails at once with a message naming the setting.

No credential is a setting. The ``local`` and ``localstack`` profiles use fixed dummy keys that
only their emulators accept; the ``aws`` profile uses boto3's default credential chain, optionally
assuming ``aws_role_arn`` (see :mod:`icestream.runtime.aws`). The ``localstack`` profile sends S3 and Glue
to the same endpoint as Kinesis, as LocalStack and ``moto_server`` serve every service on one port.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from icestream.errors import ConfigError
from icestream.limits import DEFAULT_START_POSITION
from icestream.stack import pinned_iceberg
from icestream.validation import (
    ENV_PREFIX,
    MAX_IDENTIFIER_CHARS,
    PROFILES,
    did_you_mean,
    validate_identifier,
    validate_settings,
)

CATALOG_FILE = "catalog.db"  # the JDBC catalog's SQLite file, inside the warehouse folder
SQLITE_JDBC_JAR = "/usr/share/java/sqlite-jdbc.jar"  # Debian's libxerial-sqlite-jdbc-java

# The workbook's tables are all named from the ``table`` setting, here and nowhere else:
# <table>, <table>_<suffix> (Settings.table_name, Settings.companion_table_name).
REJECTS_SUFFIX = "rejects"  # records the ingest could not accept
ARCHIVE_SUFFIX = "raw"  # every record as received (archive_raw)
METRICS_SUFFIX = "metrics"  # the continuous aggregate real_time_metrics (metrics)
TIME_TRAVEL_SUFFIX = "time_travel"  # notebook 04's copy for writes
LAYOUT_DEMO_SUFFIX = "layout_demo"  # notebook 00's demo table
SORT_DEMO_SUFFIX = "sort_demo"  # notebook 09's copy of one hour, for the sort-order rewrite
# Notebook 10's tables (Spark Structured Streaming on the lake; icestream.queries.streaming names them).
STREAMING_SUFFIXES = ("arrivals", "windows", "sessions", "device_channels", "stream_copy")
# The copies notebooks create (and reset drops).
COPY_SUFFIXES = (LAYOUT_DEMO_SUFFIX, TIME_TRAVEL_SUFFIX, SORT_DEMO_SUFFIX, *STREAMING_SUFFIXES)
# Every suffix the workbook appends to the table's own name (the demos' tables add theirs, below).
COMPANION_SUFFIXES = (REJECTS_SUFFIX, ARCHIVE_SUFFIX, METRICS_SUFFIX, *COPY_SUFFIXES)
# The demos' own tables, <table>_<suffix> (icestream.demos), each with companions of its own. Named
# like the copies (…_demo) so that none is a name a user's route would pick: a demo drops its tables
# on every run, so routing refuses these suffixes (icestream.ingest.routing.RESERVED_SUFFIXES).
CRASH_DEMO_SUFFIX = "crash_demo"  # notebook 02's exactly-once demo, with its rejects
ROUTED_DEMO_SUFFIX = "routing"  # notebook 05's routed demo: its events table, rejects and routed table
ROUTED_DEMO_ORDERS_SUFFIX = "orders"  # the routed demo's route sends orders to <table>_routing_orders
CHANGE_DEMO_SUFFIX = "change_demo"  # notebook 06's keyed table, with its rejects
METRICS_DEMO_SUFFIX = "metrics_demo"  # notebook 07's events table, with its metrics and rejects
KAFKA_DEMO_SUFFIX = "kafka_demo"  # notebook 11's ingest table (with its rejects) and its two lesson tables
KAFKA_LESSON_TABLES = ("reference", "offsets")  # <table>_kafka_demo_<name>: the reference job's, the exactly-once one
REFERENCE_DEMO_SUFFIX = "reference_demo"  # notebook 02's reference job: readStream.format("kinesis") into Iceberg
DEMO_SUFFIXES = (
    CRASH_DEMO_SUFFIX,
    ROUTED_DEMO_SUFFIX,
    CHANGE_DEMO_SUFFIX,
    METRICS_DEMO_SUFFIX,
    KAFKA_DEMO_SUFFIX,
)
# Every table a demo makes: its own, its companions, and the routed demo's routed table.
DEMO_TABLE_SUFFIXES = (
    *DEMO_SUFFIXES,
    *(f"{demo}_{suffix}" for demo in DEMO_SUFFIXES for suffix in (REJECTS_SUFFIX, ARCHIVE_SUFFIX, METRICS_SUFFIX)),
    f"{ROUTED_DEMO_SUFFIX}_{ROUTED_DEMO_ORDERS_SUFFIX}",
    *(f"{KAFKA_DEMO_SUFFIX}_{name}" for name in KAFKA_LESSON_TABLES),
    REFERENCE_DEMO_SUFFIX,  # one table, no companions
)

ICEBERG_VERSION = pinned_iceberg()  # the installed Spark line's (icestream/stack.toml)

# ICESTREAM_* variables that are no setting, each with what reads it. load_settings lets these through and
# refuses any other ICESTREAM_* name that is no setting: a typo (ICESTREAM_SHARD_CONT) was ignored without a
# word while the same typo in the YAML file was refused. The one list of them: tests/unit/test_config.py fails
# when the package, the tests, bench/ or the Makefile read a name that is neither a setting nor listed here.
NON_SETTING_VARIABLES = {
    "ICESTREAM_HOME": "the project folder (project_home)",
    "ICESTREAM_CONFIG": "the YAML settings file (load_settings)",
    "ICESTREAM_HEADLESS": "set in the kernels the notebook runner starts (icestream.workbook.runner)",
    "ICESTREAM_CDS_BUILD_TARGET": "set for the JVM that builds the class archive (icestream.runtime.cds)",
    "ICESTREAM_BENCH_RESULTS": "where bench/ writes its results (bench/smoke.py)",
    "ICESTREAM_RELIABILITY": "`full`: the reliability campaigns at full size (make reliability)",
    "ICESTREAM_BROWSER_ALL": "`1`: every notebook through JupyterLab (make browser-all)",
    "ICESTREAM_TEST_JVM_OPTIONS": "the Java options of the drivers the tests start (tests/conftest.py)",
    "ICESTREAM_SOURCE_CRASH": "the kinesis source's crash drill: `<stage>:<n>` (icestream.kinesis_source.crash_drill)",
    "ICESTREAM_SOURCE_CRASH_DIR": "where the crash drill counts the stages reached",
    "ICESTREAM_SOURCE_CRASH_GROUP": "the process group the crash drill kills",
}

# Dummy keys the emulators accept; they are never sent anywhere but a local endpoint
# (see icestream.kinesis.clients), so they are not credentials.
EMULATOR_DUMMY_KEYS = {"local": ("testing", "testing"), "localstack": ("test", "test")}


def project_home() -> Path:
    """Return the project folder: ``ICESTREAM_HOME``, else the checkout this package lives in.

    Returns:
        The folder that holds ``data/``, ``notebooks/`` and ``output/``.
    """
    if os.environ.get("ICESTREAM_HOME"):
        return Path(os.environ["ICESTREAM_HOME"]).expanduser().resolve()
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        return checkout
    return Path.cwd()


@dataclass(frozen=True)
class Settings:
    """Everything the workbook needs to know about where it runs.

    Build it with :func:`load_settings`, not directly, so that values are validated.
    """

    profile: str = "local"
    kinesis_endpoint: str | None = None  # local: read from the emulator's state file
    # Seconds a Kinesis call of setup, reset and doctor waits for a connection, then for its answer (each try).
    kinesis_timeout: float = 10.0
    region: str = "us-east-1"
    stream_name: str = "user-events"
    shard_count: int = 4
    kms_key_id: str | None = None  # server-side stream encryption, aws profile
    s3_endpoint: str | None = None  # S3 (warehouse) endpoint; None = AWS's own (localstack: kinesis_endpoint)
    glue_endpoint: str | None = None  # Glue catalog endpoint; None = AWS's own (localstack: kinesis_endpoint)
    glue_catalog_id: str | None = None  # the AWS account whose Glue catalog holds the tables (cross-account)
    s3_sse_type: str = "none"  # server-side encryption of files the catalog writes: none, s3 or kms
    s3_sse_key: str | None = None  # the KMS key (id or ARN) for s3_sse_type=kms; None = the aws/s3 key
    aws_role_arn: str | None = None  # a role every AWS client (driver, executors, Python) assumes first
    catalog: str = "lake"
    catalog_type: str = "jdbc"  # jdbc: safe for several writing processes; hadoop: one process only
    warehouse: str = "data/warehouse"
    namespace: str = "streaming_analytics"
    table: str = "user_events"
    spark_master: str = "local[*]"
    spark_ui: bool = False
    spark_log_level: str = "WARN"
    fast_local_fs: bool = True  # a local master's file: file system sets permissions without chmod (localfs)
    class_data_sharing: bool = True  # driver JVMs map the class archive `make setup` builds (runtime.cds)
    jar_source: str = "auto"
    iceberg_jars: tuple[str, ...] = ()
    jar_cache_dir: str = ".cache/jars"
    ship: str = "packed"  # non-local masters: packed environment, package only, or nothing
    ship_cache_dir: str = ".cache/ship"
    iceberg_version: str = ICEBERG_VERSION
    # The Spark line `make setup` installs (icestream/stack.toml: "4.1", "3.5"); None: the default. Sessions
    # run on the installed pyspark; `icestream doctor` says when it is not this line.
    spark_line: str | None = None
    sqlite_jdbc_jar: str = SQLITE_JDBC_JAR  # the JDBC catalog's driver
    run_dir: str = "data/run"
    output_dir: str = "output"
    start_position: str = DEFAULT_START_POSITION
    emulator_write_limits: bool = True  # the local emulator throttles puts beyond 1,000 records or 1 MiB/s per shard
    # The local emulator's loopback port: where it starts, and where it is found from any run folder (0: a free
    # port at each start, found through the run folder's state file only).
    emulator_port: int = 4567
    # Kafka (icestream.kafka): the topic `produce --to kafka` sends to and `ingest --source kafka` reads.
    kafka_bootstrap: str | None = None  # host:port[,host:port]; None: the local broker (its state file in run_dir)
    kafka_topic: str = "user-events"
    kafka_security: str = "plaintext"  # plaintext (the local broker), tls (MSK on 9094) or iam (MSK IAM on 9098)
    archive_raw: bool = False  # the ingest also keeps every record as received in <table>_raw
    archive_retention_days: int = 30  # days of arrival the raw archive keeps (expire_archive)
    metrics: bool = False  # the ingest keeps <table>_metrics (real_time_metrics) current after every batch
    # Routing (icestream.ingest.routing): each event goes to the table its route names. None: one events table.
    route: str | None = None  # a field (event_type, properties.kind) or module:function returning a Column
    route_tables: tuple[str, ...] = ()  # value=suffix pairs: value -> <table>_<suffix>; empty: <table>_<value>
    route_default: str | None = None  # the suffix of the default table; None: the events table itself
    route_unknown: str = "default"  # a value with no table: "default" (its table) or "reject" (the rejects table)
    # New top-level payload fields (icestream.ingest.schema_evolution): "off", "add-columns" or "add-and-widen".
    schema_evolution: str = "off"
    # A change stream (icestream.ingest.changes): the keyed table's declaration; None: an event stream.
    changes_columns: str | None = None  # "order_id bigint, status string, updated_at timestamp"
    changes_key: str | None = None  # the key column(s), comma-separated
    changes_order: str | None = None  # the ordering column (newer wins); None: the later arrival wins
    changes_format: str = "flat"  # "flat" (op beside the columns) or "debezium" (before/after/op envelope)
    changes_op_field: str = "op"  # flat: the field naming the operation
    changes_mode: str = "merge-on-read"  # the keyed table's row-level mode (or "copy-on-write")
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def table_name(self) -> str:
        """The events table, fully qualified: ``lake.streaming_analytics.user_events``."""
        return f"{self.catalog}.{self.namespace}.{self.table}"

    @property
    def rejects_table_name(self) -> str:
        """The table of records the ingest could not accept."""
        return self.companion_table_name(REJECTS_SUFFIX)

    @property
    def archive_table_name(self) -> str:
        """The raw archive: every record as received (with ``archive_raw``)."""
        return self.companion_table_name(ARCHIVE_SUFFIX)

    @property
    def metrics_table_name(self) -> str:
        """The continuous aggregate ``real_time_metrics`` of the events table (with ``metrics``)."""
        return self.companion_table_name(METRICS_SUFFIX)

    def companion(self, suffix: str) -> Settings:
        """These settings for the table ``<table>_<suffix>`` (a copy or a companion of the events table)."""
        return dataclasses.replace(self, table=validate_identifier(f"{self.table}_{suffix}", "table"))

    def companion_table_name(self, suffix: str) -> str:
        """The qualified name of ``<table>_<suffix>``."""
        return self.companion(suffix).table_name

    def check_companion_names(self, suffixes: Iterable[str] = COMPANION_SUFFIXES) -> None:
        """Check that ``<table>_<suffix>`` is a valid name for every suffix, before anything is created.

        Raises:
            ConfigError: If the longest companion's name would be too long, saying how long the table's may be.
        """
        longest = max(suffixes, key=len)
        room = MAX_IDENTIFIER_CHARS - 1 - len(longest)
        if len(self.table) > room:
            shown = self.table if len(self.table) <= 20 else self.table[:20] + "..."
            raise ConfigError(
                f"{ENV_PREFIX}TABLE / table: {shown!r} is {len(self.table)} characters, and its longest companion "
                f"<table>_{longest} would be {len(self.table) + 1 + len(longest)}, past the {MAX_IDENTIFIER_CHARS} "
                f"a table name may have: use a table name of at most {room} characters."
            )

    def companion_suffix(self, table: str) -> str | None:
        """The ``<suffix>`` of a bare table name ``<table>_<suffix>``, or None if it is no companion of this table."""
        head = self.table + "_"
        return table[len(head) :] or None if table.startswith(head) else None

    @property
    def namespace_name(self) -> str:
        """The namespace, qualified by the catalog."""
        return f"{self.catalog}.{self.namespace}"

    @property
    def local_master(self) -> bool:
        """True when Spark runs in this process's JVM (``local[*]``): nothing to ship to executors."""
        return self.spark_master.startswith("local")

    @property
    def is_local_endpoint(self) -> bool:
        """True when Kinesis is an emulator on this machine (dummy keys are allowed)."""
        return self.profile in ("local", "localstack")

    def path(self, setting: str) -> Path:
        """Resolve a path-valued setting against the project folder.

        Args:
            setting: One of ``warehouse``, ``jar_cache_dir``, ``ship_cache_dir``, ``run_dir``, ``output_dir``,
                ``sqlite_jdbc_jar``.

        Returns:
            An absolute path.
        """
        value = Path(getattr(self, setting)).expanduser()
        return value if value.is_absolute() else project_home() / value

    @property
    def warehouse_uri(self) -> str:
        """The warehouse as the catalog expects it: an absolute path locally, else the URI."""
        if "://" in self.warehouse:
            return self.warehouse
        return str(self.path("warehouse"))

    @property
    def catalog_file(self) -> Path:
        """The JDBC catalog's SQLite file: ``catalog.db`` in the warehouse folder.

        It follows the warehouse setting, so a temporary warehouse (the tests) has its own catalog.
        """
        return Path(self.warehouse_uri) / CATALOG_FILE

    def describe(self, names: Iterable[str] | None = None) -> dict[str, str]:
        """Return settings as strings, with where each value came from (for display).

        Args:
            names: The settings to show, in this order; None shows every setting (about fifty,
                too many to read before anything is explained, so notebooks name theirs).

        Returns:
            Each setting's name mapped to ``"value  (source)"``.

        Raises:
            ConfigError: If a name is not a setting.
        """
        known = [item.name for item in fields(self) if item.name != "sources"]
        chosen = known if names is None else list(names)
        unknown = [name for name in chosen if name not in known]
        if unknown:
            raise ConfigError(f"not a setting: {', '.join(unknown)}; the settings are listed in docs/settings.md")
        return {name: f"{getattr(self, name)}  ({self.sources.get(name, 'default')})" for name in chosen}


_PROFILE_DEFAULTS: dict[str, dict[str, Any]] = {
    "local": {},
    # LocalStack serves every service on one port: S3 and Glue follow kinesis_endpoint (see load_settings).
    "localstack": {
        "kinesis_endpoint": "http://localhost:4566",
        "catalog_type": "glue",
        "jar_source": "maven",
        "warehouse": "s3://icestream-warehouse/warehouse",
    },
    "aws": {"catalog_type": "glue", "jar_source": "maven", "warehouse": ""},
}


def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(Settings)


def _coerce(name: str, raw: Any, origin: str) -> Any:
    """Convert a raw value (a string from the environment, or YAML) to the field's type."""
    kind = _field_types()[name]
    label = f"{ENV_PREFIX}{name.upper()}" if origin == "environment" else name
    optional = isinstance(kind, types.UnionType) and type(None) in typing.get_args(kind)
    if optional:
        kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none", "null")):
            return None
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if kind is int:
            if isinstance(raw, bool):
                raise ValueError(raw)
            return int(str(raw).strip())
        if kind is float:
            if isinstance(raw, bool):
                raise ValueError(raw)
            return float(str(raw).strip())
        if typing.get_origin(kind) is tuple:
            if isinstance(raw, str):
                return tuple(part.strip() for part in raw.split(",") if part.strip())
            return tuple(str(part) for part in raw)
        return str(raw).strip()
    except (TypeError, ValueError):
        raise ConfigError(f"{label}: {raw!r} is not a valid {getattr(kind, '__name__', kind)}.") from None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"config file {path}: is not UTF-8 (byte {error.object[error.start]:#04x} at offset {error.start}): "
            "save it as UTF-8."
        ) from None
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"config file {path}: cannot be read ({error}).") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path}: expected a mapping of setting: value.")
    return loaded


def _config_file(explicit: str | os.PathLike[str] | None) -> Path | None:
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"config file {path}: not found.")
        return path
    if os.environ.get(f"{ENV_PREFIX}CONFIG"):
        path = Path(os.environ[f"{ENV_PREFIX}CONFIG"])
        if not path.is_file():
            raise ConfigError(f"{ENV_PREFIX}CONFIG: {path} is not a file.")
        return path
    default = project_home() / "icestream.yaml"
    return default if default.is_file() else None


def _environment(known: set[str]) -> dict[str, str]:
    """The settings named by ``ICESTREAM_<SETTING>`` variables, by setting.

    Raises:
        ConfigError: If an ``ICESTREAM_*`` variable names no setting and is not one of
            :data:`NON_SETTING_VARIABLES`, naming the nearest valid name.
    """
    values: dict[str, str] = {}
    valid = [f"{ENV_PREFIX}{name.upper()}" for name in sorted(known)] + list(NON_SETTING_VARIABLES)
    for key, value in sorted(os.environ.items()):
        if not key.startswith(ENV_PREFIX) or key in NON_SETTING_VARIABLES:
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if name not in known:
            raise ConfigError(
                f"environment: {key} names no setting{did_you_mean(key, valid) or '.'} "
                "Unset or rename it; the settings are listed in docs/settings.md."
            )
        values[name] = value
    return values


def load_settings(config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Build validated settings from defaults, profile, YAML file, environment and arguments.

    Args:
        config_file: A YAML file of ``setting: value``; default ``ICESTREAM_CONFIG`` or
            ``icestream.yaml`` in the project folder when present.
        **overrides: Explicit values (papermill parameters); ``None`` and ``""`` mean "not given",
            so a notebook parameter left at its default does not hide the environment.

    Returns:
        The settings.

    Raises:
        ConfigError: If a setting is unknown or has an invalid value.
    """
    known = {item.name for item in fields(Settings)} - {"sources"}
    layers: list[tuple[str, dict[str, Any]]] = []
    path = _config_file(config_file)
    if path is not None:
        layers.append((f"file {path.name}", _read_yaml(path)))
    layers.append(("environment", _environment(known)))
    layers.append(("argument", {k: v for k, v in overrides.items() if v is not None and v != ""}))

    for origin, values in layers:
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"{origin}: unknown setting {unknown[0]}{did_you_mean(unknown[0], known) or '.'} "
                "The settings are listed in docs/settings.md."
            )

    profile = "local"
    for _origin, values in layers:
        if "profile" in values:
            profile = str(values["profile"]).strip()
    if profile not in PROFILES:
        raise ConfigError(
            f"{ENV_PREFIX}PROFILE / profile: unknown profile {profile!r}; choose one of {', '.join(PROFILES)}."
        )

    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, value in _PROFILE_DEFAULTS[profile].items():
        merged[name] = value
        sources[name] = f"profile {profile}"
    for origin, values in layers:
        for name, value in values.items():
            merged[name] = _coerce(name, value, origin)
            sources[name] = origin
    merged["profile"] = profile
    if profile == "localstack":
        for name in ("s3_endpoint", "glue_endpoint"):
            if name not in merged:
                merged[name] = merged["kinesis_endpoint"]
                sources[name] = f"{sources['kinesis_endpoint']} (kinesis_endpoint)"
    settings = dataclasses.replace(Settings(), **merged, sources=sources)
    validate_settings(vars(settings))
    return settings
