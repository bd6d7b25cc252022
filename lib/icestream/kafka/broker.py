"""The local Kafka broker: one Apache Kafka 4 KRaft node (broker and controller, no ZooKeeper) on loopback.

Started like the Kinesis emulator (:mod:`icestream.kinesis.emulator`): a background JVM in its own
session, so it outlives the kernel or shell that started it, a state file under the run folder with
its pid, start time and ports (:mod:`icestream.runtime.processes`), and a stop that ends only the
process this module started. Its jars are the stack's ``[tools.kafka]`` packages, resolved from Maven
Central once into ``<jar cache>/kafka-<version>/`` (:func:`icestream.runtime.maven.resolve_tool`).

Everything it writes is under ``<run_dir>``: ``kafka.json`` (the state), ``kafka.log`` (the JVM's
stdout and stderr) and ``kafka/`` (its ``server.properties``, its log4j2 settings, the partition logs
in ``kafka/data`` and the KRaft metadata log in ``kafka/metadata``). The data folder is formatted
once (``kafka.tools.StorageTool format``) and kept across stops, so topics and records survive a
restart; deleting ``<run_dir>/kafka`` while it is stopped starts an empty cluster.
"""

from __future__ import annotations

import base64
import importlib.resources
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from icestream.errors import KafkaBrokerError
from icestream.kafka.jvm import KafkaJvm
from icestream.runtime import maven, processes
from icestream.runtime.java_options import C1_ONLY, SERIAL_GC
from icestream.runtime.processes import LOOPBACK, free_port, port_taken
from icestream.stack import tool

NODE_ID = 1
PROPERTIES_FILE = "server.properties"
LOG4J_FILE = "log4j2.properties"
META_PROPERTIES = "meta.properties"  # what StorageTool format writes into each formatted folder
STORAGE_TOOL = "kafka.tools.StorageTool"
START_COMMAND = "icestream kafka start"
# Kafka's scripts give the broker a 1 GiB heap; one node with a few small topics runs in far less, and
# the machines this runs on have 2 cores shared with Spark. Serial GC: one collector thread, no G1 regions.
# C1 alone (no C2 compile threads): a local broker of small topics; it started in 4.6 s instead of 6.3
# (docs/commands.md). The code cache stays at its tiered size, as for the drivers (java_options).
JVM_OPTIONS = ("-Xms64m", "-Xmx512m", SERIAL_GC, *C1_ONLY.split(), "-Djava.awt.headless=true")
START_TIMEOUT_SECONDS = 90.0  # the JVM start, the KRaft election and the broker's unfencing (docs/commands.md)
FORMAT_TIMEOUT_SECONDS = 60.0
_POLL_SECONDS = 0.25
# Lines of the broker's log that name a cause a user can fix, and what to do about it.
_PORT_IN_USE = "Address already in use"
_STALE_DATA = ("meta.properties", "InconsistentClusterIdException", "cluster.id", "Invalid cluster")


@dataclass(frozen=True)
class BrokerState:
    """What the state file records about a started broker."""

    pid: int
    process_start: str  # /proc start time, so a reused pid is never mistaken for ours
    bootstrap: str  # host:port of the PLAINTEXT listener, what clients are given
    broker_port: int
    controller_port: int
    started_at: float
    log: str
    properties: str  # the server.properties it runs with (also a mark of its command line)


@dataclass(frozen=True)
class BrokerStatus:
    """The broker's state as seen now."""

    running: bool
    healthy: bool
    bootstrap: str | None
    pid: int | None
    detail: str


@dataclass(frozen=True)
class StartResult:
    """What :meth:`Broker.start` did: the bootstrap address, and whether one was running already."""

    bootstrap: str
    pid: int
    already_running: bool


def server_properties(data: Path, metadata: Path, broker_port: int, controller_port: int) -> str:
    """The broker's ``server.properties``: one KRaft node, both roles, loopback listeners only.

    The controller quorum is this node alone, named by ``controller.quorum.voters`` (a static quorum):
    each start picks free ports and writes them here, and a static voter set is read from this file at
    every start, where a dynamic one (``format --standalone``) keeps the first start's controller
    address in the metadata log.
    """
    controller = f"{LOOPBACK}:{controller_port}"
    lines = [
        "# Written by icestream at every `icestream kafka start` (icestream.kafka.broker); edits are lost.",
        "process.roles=broker,controller",
        f"node.id={NODE_ID}",
        f"controller.quorum.voters={NODE_ID}@{controller}",
        f"listeners=PLAINTEXT://{LOOPBACK}:{broker_port},CONTROLLER://{controller}",
        f"advertised.listeners=PLAINTEXT://{LOOPBACK}:{broker_port}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        "controller.listener.names=CONTROLLER",
        f"log.dirs={data}",
        f"metadata.log.dir={metadata}",
        # One node: every internal topic has one replica, and a consumer group starts at once.
        "num.partitions=1",
        "default.replication.factor=1",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        # A topic is made on purpose (AdminClient, kafka-topics), not by a typo in a consumer's name.
        "auto.create.topics.enable=false",
        # Two cores shared with Spark: Kafka's defaults (3 network, 8 I/O threads) are for a server.
        "num.network.threads=2",
        "num.io.threads=2",
        "num.recovery.threads.per.data.dir=1",
        # The controller appends a no-op record to the metadata log every 500 ms by default (KIP-835), so that
        # brokers can tell a quiet controller from a lost one: one node has no other broker to tell, and the
        # appends were a third of an idle broker's CPU (2.6 -> 1.7 CPU-s in 90 s, docs/testing.md).
        "metadata.max.idle.interval.ms=0",
    ]
    return "\n".join(lines) + "\n"


def cluster_id() -> str:
    """A new cluster id as Kafka writes one: 16 random bytes, URL-safe base64 without padding.

    Kafka's own ``random-uuid`` never returns an id starting with "-", which a command line would read
    as an option; neither does this.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def answers(bootstrap: str, timeout: float = 5.0) -> bool:
    """True when a Kafka broker on ``bootstrap`` (host:port) answers a metadata request naming a broker.

    Raises:
        KafkaBrokerError: If the Python Kafka client (confluent-kafka) is not installed.
    """
    host, port = bootstrap.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=min(timeout, 2.0)):
            pass
    except OSError:
        return False  # not listening yet: no client, so no client's connection-refused lines either
    try:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient
    except ImportError:
        raise KafkaBrokerError(
            "The Python Kafka client is not installed (confluent-kafka): run `make setup`, or "
            "`pip install -c constraints.txt confluent-kafka`."
        ) from None
    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "socket.timeout.ms": int(timeout * 1000)})
    try:
        metadata = client.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return bool(metadata.brokers)


def _log_tail(log: Path, lines: int = 200) -> list[str]:
    try:
        return log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


class Broker(KafkaJvm[BrokerState]):
    """Start, stop and inspect the local broker whose state and data live in ``run_dir``."""

    STATE_FILE = "kafka.json"  # under run_dir, beside the emulator's
    LOG_FILE = "kafka.log"
    FOLDER = "kafka"  # under run_dir: server.properties, log4j2.properties, data/, metadata/
    MAIN_CLASS = "kafka.Kafka"
    WHO = "The Kafka broker"
    ERROR = KafkaBrokerError
    STATE = BrokerState

    def __init__(self, run_dir: Path, jar_cache: Path) -> None:
        super().__init__(run_dir, jar_cache)
        self.data = self.folder / "data"
        self.metadata = self.folder / "metadata"
        self.properties = self.folder / PROPERTIES_FILE

    def status(self) -> BrokerStatus:
        """Report whether the broker runs and answers."""
        state = self._read_state()
        if state is None:
            return BrokerStatus(False, False, None, None, f"not running; start it with `{START_COMMAND}`")
        if not self._owns(state):
            return BrokerStatus(
                False, False, None, None, f"not running (stale state file); start it with `{START_COMMAND}`"
            )
        if answers(state.bootstrap):
            return BrokerStatus(True, True, state.bootstrap, state.pid, "running")
        return BrokerStatus(
            True, False, state.bootstrap, state.pid, f"process alive but not answering; see {state.log}"
        )

    def bootstrap(self) -> str | None:
        """The bootstrap address of a running, answering broker, else None."""
        status = self.status()
        return status.bootstrap if status.healthy else None

    def jars(self) -> list[Path]:
        """The broker's class path: the stack's ``[tools.kafka]`` jars, resolved once (Maven) and cached.

        Raises:
            JarError: If Maven is missing, refuses a coordinate, or a checksum does not match.
        """
        return [jar.path for jar in maven.resolve_tool(tool("kafka"), self.jar_cache)]

    def start(self, port: int | None = None, timeout: float = START_TIMEOUT_SECONDS) -> StartResult:
        """Start the broker unless one of this run folder already runs.

        Args:
            port: Loopback port of the PLAINTEXT listener (default: a free one).
            timeout: Seconds to wait for the broker to answer a metadata request.

        Returns:
            Its bootstrap address (``127.0.0.1:PORT``), its pid, and whether it was running already.

        Raises:
            KafkaBrokerError: If Java is missing or too old, the port is taken, the data folder was not
                formatted by this module, or the broker does not answer in time.
            JarError: If its jars cannot be resolved.
        """
        state = self._read_state()
        if state is not None and self._owns(state):
            if not answers(state.bootstrap):
                raise KafkaBrokerError(
                    f"The Kafka broker (pid {state.pid}) runs but does not answer on {state.bootstrap}; see "
                    f"{state.log}, or stop it with `icestream kafka stop` and start it again."
                )
            return StartResult(state.bootstrap, state.pid, already_running=True)
        java = self._java()
        if port is not None and port_taken(port):
            raise KafkaBrokerError(
                f"Port {port} on {LOOPBACK} is in use: stop what listens there, or leave out --port for a free one."
            )
        class_path = ":".join(str(jar) for jar in self.jars())
        broker_port = port or free_port()
        controller_port = free_port()
        while controller_port == broker_port:
            controller_port = free_port()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.properties.write_text(server_properties(self.data, self.metadata, broker_port, controller_port))
        log4j = self.folder / LOG4J_FILE
        log4j.write_text(importlib.resources.files("icestream.kafka").joinpath(LOG4J_FILE).read_text())
        base = [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}", "-cp", class_path]
        self._format(base)
        process = processes.spawn([*base, self.MAIN_CLASS, str(self.properties)], self.log)
        bootstrap = f"{LOOPBACK}:{broker_port}"
        processes.write_state(
            self.state_file,
            process.pid,
            bootstrap=bootstrap,
            broker_port=broker_port,
            controller_port=controller_port,
            started_at=time.time(),
            log=str(self.log),
            properties=str(self.properties),
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self.state_file.unlink(missing_ok=True)
                raise KafkaBrokerError(self._exit_message(process.returncode))
            if answers(bootstrap, timeout=2.0):
                return StartResult(bootstrap, process.pid, already_running=False)
            time.sleep(_POLL_SECONDS)
        self.stop()
        raise KafkaBrokerError(
            f"The Kafka broker did not answer on {bootstrap} within {timeout:.0f} s; see {self.log}."
        )

    def _formatted(self) -> bool:
        """True when both folders carry Kafka's ``meta.properties``, False when neither exists or holds a file.

        Raises:
            KafkaBrokerError: When only one is formatted, or one holds files but no ``meta.properties``.
        """
        folders = (self.data, self.metadata)
        unformatted = [folder for folder in folders if not (folder / META_PROPERTIES).is_file()]
        if not unformatted:
            return True
        with_files = [folder for folder in unformatted if folder.is_dir() and any(folder.iterdir())]
        if with_files or len(unformatted) < len(folders):
            stale = (with_files or unformatted)[0]
            raise KafkaBrokerError(
                f"The Kafka data folder {self.folder} is stale ({stale} has no {META_PROPERTIES}, so Kafka did not "
                f"format it for this cluster): delete it (`rm -r {self.folder}`, which deletes its topics) and start "
                "again."
            )
        return False

    def _format(self, base: list[str]) -> None:
        """Format the data and metadata folders once (Kafka's ``kafka-storage format``), for a new cluster id."""
        if self._formatted():
            return
        command = [*base, STORAGE_TOOL, "format", "-t", cluster_id(), "-c", str(self.properties)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=FORMAT_TIMEOUT_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            raise KafkaBrokerError(
                f"Formatting the Kafka data folder {self.folder} took over {FORMAT_TIMEOUT_SECONDS:.0f} s: "
                "check the disk, delete the folder and start again."
            ) from None
        if done.returncode != 0:
            with self.log.open("a") as log:
                log.write(done.stdout + done.stderr)
            raise KafkaBrokerError(
                f"Formatting the Kafka data folder {self.folder} failed (code {done.returncode}); see {self.log}, "
                f"delete the folder (`rm -r {self.folder}`) and start again."
            )

    def _exit_message(self, code: int) -> str:
        """One line for a broker that exited at start: the port or the data folder when its log names them."""
        tail = _log_tail(self.log)
        if any(_PORT_IN_USE in line for line in tail):
            return (
                f"The Kafka broker exited at start: a port it was given is in use (see {self.log}); start it again "
                "for other free ports, or choose another --port."
            )
        if any(mark in line for line in tail for mark in _STALE_DATA if "ERROR" in line or "Exception" in line):
            return (
                f"The Kafka broker exited at start: its data folder {self.folder} does not fit (see {self.log}); "
                f"delete it (`rm -r {self.folder}`, which deletes its topics) and start again."
            )
        return f"The Kafka broker exited at start (code {code}); see {self.log}."
