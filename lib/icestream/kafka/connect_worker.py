"""A Kafka Connect worker running Iceberg's sink on the project's catalog: what users run instead of icestream.

The peer a user would pick to get a topic into Iceberg, run for real beside icestream (the tests, the
kill drill, ``bench/bench_peers.py``): Apache Kafka's standalone worker
(``org.apache.kafka.connect.cli.ConnectStandalone``) with one connector, Iceberg's
``IcebergSinkConnector``, configured as the reference design's Kafka Connect configuration where its
options apply (:func:`connector_config` says which do not). Its exactly-once rests on the sink's own
protocol: each task writes data files, and one coordinator (in the task holding partition 0) commits
them to the table every ``iceberg.control.commit.interval-ms``, with the consumed offsets in the
snapshot's summary, talking to the tasks over a control topic.

Started like the local broker (:mod:`icestream.kafka.broker`): a background JVM in its own session, a
state file under the run folder (``connect.json``), its log in ``connect.log``, and ``connect/`` with
the worker's and connector's properties, its log4j2 settings and ``plugins/iceberg-sink/``, the plugin
folder Connect loads the sink from in a class loader of its own. Two stack tools give the jars
(``lib/icestream/stack.toml``): ``[tools.kafka-connect]``, the worker's class path, and
``[tools.iceberg-sink]``, the plugin (the sink's runtime zip is not published, so its contents are
resolved from Maven); the JDBC catalog's SQLite driver joins the plugin (``icestream.runtime.jars``).

The worker's REST interface listens on loopback only; :meth:`ConnectWorker.start` returns once the
connector and all its tasks report RUNNING there.
"""

from __future__ import annotations

import importlib.resources
import json
import shutil
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icestream.config import Settings
from icestream.errors import ConfigError, KafkaConnectError
from icestream.kafka.connection import KafkaConnection
from icestream.kafka.jvm import KafkaJvm
from icestream.kafka.topics import ensure_topic
from icestream.runtime import maven, processes
from icestream.runtime.jars import sqlite_jdbc_driver
from icestream.runtime.processes import LOOPBACK, free_port
from icestream.runtime.spark import catalog_conf
from icestream.stack import tool
from icestream.validation import validate_identifier

CONNECTOR_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"
PLUGIN = "iceberg-sink"  # the plugin's folder under connect/plugins/
WORKER_PROPERTIES = "worker.properties"
CONNECTOR_PROPERTIES = "sink.properties"
LOG4J_FILE = "connect_log4j2.properties"  # shipped beside this module
# The sink's documented default (5 minutes), the one a user gets without setting it.
DEFAULT_COMMIT_INTERVAL_MS = 300_000
# connect-distributed.sh's and connect-standalone.sh's own heap (KAFKA_HEAP_OPTS), and the JVM's default
# collector and compilers: the worker as a user starts it, so the benchmark measures what they would run.
JVM_OPTIONS = ("-Xms256m", "-Xmx2g", "-Djava.awt.headless=true")
REFERENCE_TASKS_MAX = 4  # the reference configuration's tasks.max
START_TIMEOUT_SECONDS = 120.0  # the JVM, plugin scanning, the catalog, the tasks' group join
_POLL_SECONDS = 0.25
# Log lines of the sink's coordinator (Coordinator.java), INFO in connect_log4j2.properties: a crash drill
# finds a commit under way between them.
COMMIT_STARTED = "initiated commit"
# "completed commit <id>, committed to N table(s)": one line a commit (the per-table line before it says
# "completed commit to table").
COMMIT_FINISHED = ", committed to "


@dataclass(frozen=True)
class SinkSpec:
    """What one Iceberg sink connector reads and writes, and how often it commits.

    Args:
        name: The connector's name; its consumer group is ``connect-<name>``.
        topic: The topic it reads.
        table: The qualified table it writes (``catalog.namespace.table``, the catalog the settings name).
        dead_letter_topic: Where records the converter or a transform refuses go.
        control_topic: The sink's control topic (one per connector: the coordinator's and tasks' channel).
        commit_interval_ms: ``iceberg.control.commit.interval-ms``.
        tasks_max: ``tasks.max``.
    """

    name: str
    topic: str
    table: str
    dead_letter_topic: str
    control_topic: str
    commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS
    tasks_max: int = 1

    @property
    def consumer_group(self) -> str:
        """The sink tasks' consumer group (Connect names it ``connect-<connector>``); it holds their offsets."""
        return f"connect-{self.name}"


def sink_spec(
    settings: Settings, partition_count: int, commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS
) -> SinkSpec:
    """The connector for the settings' topic and table; its dead-letter and control topics named after them.

    ``tasks.max`` is the reference's 4, capped at the topic's partitions: a task without a partition idles.

    Args:
        settings: Name the topic (``kafka_topic``) and the table (``table_name``).
        partition_count: The topic's partitions.
        commit_interval_ms: ``iceberg.control.commit.interval-ms`` (default: the sink's own, 5 minutes).

    Raises:
        ConfigError: If the commit interval or the partition count is not positive.
    """
    if commit_interval_ms <= 0 or partition_count <= 0:
        raise ConfigError(
            f"commit_interval_ms ({commit_interval_ms}) and partition_count ({partition_count}) must be positive."
        )
    table = validate_identifier(settings.table, "table")
    return SinkSpec(
        name=f"iceberg-sink-{table}",
        topic=settings.kafka_topic,
        table=settings.table_name,
        dead_letter_topic=f"{settings.kafka_topic}-dlq",
        # One control topic per connector, as the sink's documentation asks: a connector for another table
        # on the same topic (the benchmark's runs) must not read an earlier one's commit events.
        control_topic=f"{settings.kafka_topic}-control-{table}",
        commit_interval_ms=commit_interval_ms,
        tasks_max=min(REFERENCE_TASKS_MAX, partition_count),
    )


def sink_catalog_properties(settings: Settings) -> dict[str, str]:
    """The sink's ``iceberg.catalog*`` entries: the very catalog Spark's sessions use (its settings, renamed).

    The catalog's name matters for the JDBC catalog: its rows are keyed by it, so the sink must call the
    catalog what Spark calls it to see the same tables.

    Raises:
        ConfigError: For the Glue catalog: the plugin here carries no AWS SDK.
    """
    if settings.catalog_type == "glue":
        raise ConfigError(
            "The Iceberg sink's plugin here carries the JDBC and Hadoop catalogs only (no AWS SDK): use "
            "ICESTREAM_CATALOG_TYPE=jdbc (the local default) or hadoop."
        )
    prefix = f"spark.sql.catalog.{settings.catalog}"
    properties = {"iceberg.catalog": settings.catalog}
    for key, value in catalog_conf(settings).items():
        if key.startswith(prefix + "."):
            properties[f"iceberg.catalog.{key.removeprefix(prefix + '.')}"] = value
    return properties


def connector_config(settings: Settings, spec: SinkSpec) -> dict[str, str]:
    """The connector's configuration: the reference design's Kafka Connect options, where they apply here.

    Kept from the reference: the connector class, ``topics``, the ``InsertField$Value`` transform adding
    the record's timestamp, ``errors.tolerance=all`` with a dead-letter topic, the 128 MiB target file
    size. Changed: ``tasks.max`` (see :func:`sink_spec`); the dead-letter topic's replication factor is
    1 (one broker); the inserted field is ``arrival_ts``, the events table's column for the Kafka
    record's timestamp, which is what InsertField's ``timestamp.field`` inserts (the reference's
    ``processing_timestamp`` names it as if it were the processing time), and the same transform adds
    the partition and offset into the table's ``shard_id`` and ``sequence_number``, so a row says where
    it came from as icestream's rows do. Added: the catalog (the reference's Glue catalog is the
    project's), the control topic and the commit interval, which the reference leaves at their
    defaults, and the converters. Left out, since the sink has no such options (its table options
    apply only to tables it creates, and this table exists): ``iceberg.table.default.partition-spec``,
    ``write-format``, ``compression-codec``; and ``flush.size``, an option of other sinks (S3's).
    ``consumer.max.poll.records`` is a worker option: :func:`worker_properties` sets it.

    Args:
        settings: Give the catalog (:func:`sink_catalog_properties`).
        spec: The connector's topics, table, interval and tasks.

    Returns:
        The properties of the connector's configuration, by name.
    """
    _catalog, namespace, table = spec.table.split(".")
    config = {
        "name": spec.name,
        "connector.class": CONNECTOR_CLASS,
        "tasks.max": str(spec.tasks_max),
        "topics": spec.topic,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        # The events are JSON objects without Connect's schema envelope: each becomes a map, which the
        # sink converts to the table's columns by name.
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "iceberg.tables": f"{namespace}.{table}",
        "iceberg.tables.auto-create-enabled": "false",
        "iceberg.tables.write-props.write.target-file-size-bytes": str(128 * 1024 * 1024),
        "iceberg.control.topic": spec.control_topic,
        "iceberg.control.commit.interval-ms": str(spec.commit_interval_ms),
        "transforms": "AddMetadata",
        "transforms.AddMetadata.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.AddMetadata.timestamp.field": "arrival_ts",
        "transforms.AddMetadata.partition.field": "shard_id",
        "transforms.AddMetadata.offset.field": "sequence_number",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": spec.dead_letter_topic,
        "errors.deadletterqueue.topic.replication.factor": "1",
        # Each dead letter says why in its headers (__connect.errors.*), as a rejects table would.
        "errors.deadletterqueue.context.headers.enable": "true",
        **sink_catalog_properties(settings),
    }
    return config


def worker_properties(
    connection: KafkaConnection, rest_port: int, plugins: Path, offsets: Path, commit_interval_ms: int
) -> dict[str, str]:
    """The standalone worker's properties: the cluster, a loopback REST port, the plugin folder.

    A sink's offsets live in its consumer group on the cluster, not in the standalone worker's offsets
    file (which only a source connector would use).

    ``offset.flush.interval.ms`` is the sink's commit interval (at most Connect's default, 60 s): a
    sink task's consumer waits up to that long for records between two ``put`` calls, and the sink's
    tasks answer the coordinator's call to commit only inside ``put``. With Connect's default a task
    with no new records answered a 1 s commit 24 s late (seen here, 2026-12-02). The sink commits its
    offsets itself (its ``preCommit`` hands Connect none), so the shorter flush costs nothing else.
    """
    if connection.security != "plaintext":
        raise ConfigError(
            "The Kafka Connect worker here runs against the local broker (plaintext) only, not "
            f"kafka_security={connection.security}."
        )
    return {
        "bootstrap.servers": connection.bootstrap,
        "listeners": f"http://{LOOPBACK}:{rest_port}",
        "rest.advertised.host.name": LOOPBACK,
        "rest.advertised.port": str(rest_port),
        "plugin.path": str(plugins),
        # Scan the plugin folder only: the sink's jars carry no ServiceLoader manifests for Connect.
        "plugin.discovery": "only_scan",
        "offset.storage.file.filename": str(offsets),
        "offset.flush.interval.ms": str(min(commit_interval_ms, 60_000)),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        # The reference configuration's consumer.max.poll.records, a worker option (Connect's default is 500).
        "consumer.max.poll.records": "1000",
    }


def properties_text(properties: dict[str, str], header: str) -> str:
    """``key=value`` lines as Java's Properties reads them (``\\``, ``:`` and ``=`` in keys escaped, values as is)."""
    lines = [f"# {header}"]
    for key, value in properties.items():
        escaped_key = key.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=")
        lines.append(f"{escaped_key}={value.replace(chr(92), chr(92) * 2)}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class WorkerState:
    """What the state file records about a started worker."""

    pid: int
    process_start: str
    rest: str  # http://127.0.0.1:PORT
    connector: str
    started_at: float
    log: str
    properties: str  # the worker.properties it runs with (also a mark of its command line)


@dataclass(frozen=True)
class ConnectorStatus:
    """The connector's and its tasks' states as the worker's REST interface reports them."""

    connector: str  # RUNNING, FAILED, PAUSED, UNASSIGNED, ...
    tasks: tuple[str, ...]
    trace: str  # the first failed one's stack trace, else ''

    @property
    def running(self) -> bool:
        """True when the connector and every task run."""
        return self.connector == "RUNNING" and bool(self.tasks) and all(task == "RUNNING" for task in self.tasks)


class ConnectWorker(KafkaJvm[WorkerState]):
    """Start, stop and inspect the Connect worker whose state lives in ``run_dir``."""

    STATE_FILE = "connect.json"  # under run_dir, beside the broker's
    LOG_FILE = "connect.log"
    FOLDER = "connect"  # under run_dir: worker.properties, sink.properties, log4j2.properties, plugins/, offsets
    MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectStandalone"
    WHO = "The Kafka Connect worker"
    ERROR = KafkaConnectError
    STATE = WorkerState

    def __init__(self, run_dir: Path, jar_cache: Path) -> None:
        super().__init__(run_dir, jar_cache)
        self.plugins = self.folder / "plugins"

    def pid(self) -> int | None:
        """The running worker's pid (its process group), else None."""
        state = self._read_state()
        return state.pid if state is not None and self._owns(state) else None

    def worker_jars(self) -> list[Path]:
        """The worker's class path: the stack's ``[tools.kafka-connect]`` jars, resolved once and cached."""
        return [jar.path for jar in maven.resolve_tool(tool("kafka-connect"), self.jar_cache)]

    def plugin_jars(self, settings: Settings) -> list[Path]:
        """The sink plugin's jars: ``[tools.iceberg-sink]``, and the SQLite driver for the JDBC catalog."""
        jars = [jar.path for jar in maven.resolve_tool(tool("iceberg-sink"), self.jar_cache)]
        if settings.catalog_type == "jdbc":
            jars.append(sqlite_jdbc_driver(settings)[0])
        return jars

    def resolve(self, settings: Settings) -> tuple[int, int]:
        """Resolve both tools' jars (``make jars`` does, once); return how many each has."""
        return len(self.worker_jars()), len(self.plugin_jars(settings))

    def _link_plugin(self, jars: list[Path]) -> Path:
        """The plugin folder made anew: a link to each jar, so Connect loads exactly these."""
        folder = self.plugins / PLUGIN
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for jar in jars:
            (folder / jar.name).symlink_to(jar.resolve())
        return folder

    def start(
        self,
        settings: Settings,
        connection: KafkaConnection,
        spec: SinkSpec,
        timeout: float = START_TIMEOUT_SECONDS,
    ) -> WorkerState:
        """Start the worker with the one sink connector ``spec``, unless one of this run folder runs already.

        The topic and the table must exist; the control topic is made here (one partition, as the sink's
        documentation makes it: the local broker creates no topic by itself), the dead-letter topic by Connect.

        Args:
            settings: The catalog and the SQLite driver.
            connection: The Kafka cluster (the local broker).
            spec: The connector.
            timeout: Seconds to wait for the connector and its tasks to run.

        Returns:
            The started worker's state (pid, REST address, log).

        Raises:
            KafkaConnectError: If Java is missing or too old, a worker runs already, or the connector does
                not run in time (the message names the log and the first failure).
            JarError: If the jars cannot be resolved.
        """
        state = self._read_state()
        if state is not None and self._owns(state):
            raise KafkaConnectError(
                f"A Kafka Connect worker (pid {state.pid}, connector {state.connector}) runs already for "
                f"{self.run_dir}: stop it first (ConnectWorker.stop)."
            )
        java = self._java()
        ensure_topic(connection, 1, topic=spec.control_topic)
        class_path = ":".join(str(jar) for jar in self.worker_jars())
        self.folder.mkdir(parents=True, exist_ok=True)
        plugin_jars = self.plugin_jars(settings)
        self._link_plugin(plugin_jars)
        rest_port = free_port()
        worker_file = self.folder / WORKER_PROPERTIES
        worker_file.write_text(
            properties_text(
                worker_properties(
                    connection, rest_port, self.plugins, self.folder / "standalone.offsets", spec.commit_interval_ms
                ),
                "Written by icestream at every Connect worker start (icestream.kafka.connect_worker); edits are lost.",
            )
        )
        connector_file = self.folder / CONNECTOR_PROPERTIES
        connector_file.write_text(
            properties_text(connector_config(settings, spec), f"The {CONNECTOR_CLASS} connector, by icestream.")
        )
        log4j = self.folder / "log4j2.properties"
        log4j.write_text(importlib.resources.files("icestream.kafka").joinpath(LOG4J_FILE).read_text())
        options = [*JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}"]
        if settings.catalog_type == "jdbc":
            natives = sqlite_jdbc_driver(settings)[1]
            if natives:
                options.append(f"-Djava.library.path={':'.join(natives)}")
        command = [java, *options, "-cp", class_path, self.MAIN_CLASS, str(worker_file), str(connector_file)]
        process = processes.spawn(command, self.log)
        rest = f"http://{LOOPBACK}:{rest_port}"
        processes.write_state(
            self.state_file,
            process.pid,
            rest=rest,
            connector=spec.name,
            started_at=time.time(),
            log=str(self.log),
            properties=str(worker_file),
        )
        started = self._read_state()
        assert started is not None
        deadline = time.monotonic() + timeout
        status: ConnectorStatus | None = None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self.state_file.unlink(missing_ok=True)
                raise KafkaConnectError(
                    f"The Kafka Connect worker exited at start (code {process.returncode}); see {self.log}."
                )
            status = self.connector_status()
            if status is not None and status.running:
                return started
            if status is not None and "FAILED" in (status.connector, *status.tasks):
                self.stop()
                first = status.trace.strip().splitlines()[0] if status.trace.strip() else "no trace"
                raise KafkaConnectError(f"The Iceberg sink failed at start: {first}; see {self.log}.")
            time.sleep(_POLL_SECONDS)
        self.stop()
        raise KafkaConnectError(
            f"The Iceberg sink did not run within {timeout:.0f} s (last status: {status}); see {self.log}."
        )

    def connector_status(self) -> ConnectorStatus | None:
        """The connector's status from the worker's REST interface; None while it does not answer."""
        state = self._read_state()
        if state is None:
            return None
        answer = self._get(f"{state.rest}/connectors/{state.connector}/status")
        if answer is None:
            return None
        tasks = answer.get("tasks", [])
        traces = [part.get("trace", "") for part in (answer.get("connector", {}), *tasks) if part.get("trace")]
        return ConnectorStatus(
            answer.get("connector", {}).get("state", "UNKNOWN"),
            tuple(task.get("state", "UNKNOWN") for task in tasks),
            traces[0] if traces else "",
        )

    @staticmethod
    def _get(url: str) -> Any:
        try:
            with urllib.request.urlopen(url, timeout=5.0) as response:  # noqa: S310 - our own loopback worker
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None
