"""A Spark standalone cluster on loopback, from pip's pyspark: a master and workers as separate JVMs.

For trying the cluster path on one machine, for the cluster tests (``tests/cluster``) and for
``bench/bench_cluster.py``. pip's pyspark lacks the ``sbin/`` start scripts, but its classes are
all there: ``bin/spark-class org.apache.spark.deploy.master.Master`` and ``...worker.Worker``.
Every daemon binds 127.0.0.1 and runs in its own process group, so stopping or killing a worker
takes the executors it launched with it, as losing a node would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from icestream.errors import SparkStartError
from icestream.runtime.processes import free_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DAEMON_MEMORY = "512m"  # the master's and workers' own heap; executors get spark.executor.memory


def spark_home() -> Path:
    """The pyspark package folder, which pip installs as a complete SPARK_HOME (jars, bin/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Daemon:
    """One master or worker JVM."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    web_port: int

    def alive(self) -> bool:
        """True while the JVM runs."""
        return self.process.poll() is None


class StandaloneCluster:
    """A master and ``workers`` workers on loopback; use as a context manager or call start/stop.

    Args:
        folder: Where logs and the workers' working directories (executors' files) go.
        workers: Number of workers.
        cores: Cores each worker offers.
        memory: Memory each worker offers to executors (``2g``).
    """

    def __init__(self, folder: Path, workers: int = 2, cores: int = 1, memory: str = "2g") -> None:
        self.folder = folder
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.master: Daemon | None = None
        self.worker_daemons: dict[int, Daemon] = {}

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None):
        self.stop()

    def _launch(self, name: str, arguments: list[str], web_port: int) -> Daemon:
        home = spark_home()
        # Nothing of this process's Python reaches the executors through the daemons' environment:
        # a node's Python is whatever the application ships or points it at.
        inherited = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYSPARK_PYTHON")}
        env = {
            **inherited,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        }
        log = self.folder / f"{name}.log"
        with log.open("ab") as sink:
            process = subprocess.Popen(
                [str(home / "bin" / "spark-class"), *arguments, "--host", "127.0.0.1", "--webui-port", str(web_port)],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return Daemon(name, process, log, web_port)

    def state(self) -> dict:
        """The master's JSON status (``workers``, ``aliveworkers``, ``activeapps`` ...)."""
        if self.master is None:
            raise SparkStartError("The standalone cluster is not started.")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.master.web_port}/json/", timeout=5) as answer:
            return json.load(answer)

    def alive_workers(self) -> int:
        """Workers the master counts as alive."""
        return int(self.state().get("aliveworkers", 0))

    def _wait(self, ready: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.master is not None and not self.master.alive():
                break
            with contextlib.suppress(OSError, ValueError):
                if ready():
                    return
            time.sleep(0.5)
        logs = ", ".join(str(daemon.log) for daemon in [self.master, *self.worker_daemons.values()] if daemon)
        raise SparkStartError(f"The standalone cluster did not get {what} within {timeout:.0f} s; see {logs}.")

    def start(self, timeout: float = 180.0) -> StandaloneCluster:
        """Start the master and every worker; return when all workers are registered."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.master = self._launch("master", [MASTER_CLASS, "--port", str(self.port)], free_port())
        self._wait(lambda: self.state().get("status") == "ALIVE", "a master", timeout)
        for index in range(self.workers):
            self.start_worker(index)
        self._wait(lambda: self.alive_workers() >= self.workers, f"{self.workers} workers", timeout)
        return self

    def start_worker(self, index: int, timeout: float | None = None) -> None:
        """Start worker ``index`` (again); with ``timeout``, wait until every worker is registered."""
        work = self.folder / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        arguments = [
            WORKER_CLASS,
            self.master_url,
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--work-dir",
            str(work),
        ]
        self.worker_daemons[index] = self._launch(f"worker-{index}", arguments, free_port())
        if timeout is not None:
            self._wait(lambda: self.alive_workers() >= self.workers, f"{self.workers} workers", timeout)

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` and the executors it launched (its process group), like a lost node."""
        daemon = self.worker_daemons[index]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(daemon.process.pid, signal.SIGKILL)
        daemon.process.wait(timeout=30)

    def stop(self) -> None:
        """Stop every worker (with its executors), then the master; SIGKILL what does not stop in 20 s."""
        daemons = [*self.worker_daemons.values(), *([self.master] if self.master else [])]
        for daemon in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(daemon.process.pid, signal.SIGTERM)
        for daemon in daemons:
            try:
                daemon.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(daemon.process.pid, signal.SIGKILL)
                daemon.process.wait(timeout=10)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(daemon.process.pid, signal.SIGKILL)  # an executor that outlived its worker
        self.worker_daemons.clear()
        self.master = None
