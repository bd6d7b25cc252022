"""The local Kinesis emulator: moto's server in a background process on a loopback port.

Run as ``python -m icestream.kinesis.emulator -H 127.0.0.1 -p PORT``: moto's server with its Kinesis model
patched to behave and scale like Kinesis (see :mod:`icestream.kinesis.moto_kinesis`).

The server runs as its own process (new session), so it outlives the papermill kernels that use
it one after another. A state file under ``data/run/`` records its pid, port and start time (see
:mod:`icestream.runtime.processes`); start is idempotent, stop ends only the process this module started
(checked by pid, start time and command line), and status reports health. moto keeps its state in
memory: stopping the emulator loses every stream and record in it.

An emulator is also found on its port (:class:`Emulator`'s ``port``, the ``emulator_port`` setting) when
the run folder holds no state file of it: with ``ICESTREAM_RUN_DIR`` moved, setup had said "not running"
while one ran, and start had started a second one, which did not hold the first one's streams. One found
so is used, never stopped: only the run folder that started it holds the proof that it is ours.
"""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from icestream.errors import EmulatorError
from icestream.runtime import processes
from icestream.runtime.processes import LOOPBACK, free_port, port_taken

STATE_FILE = "emulator.json"
LOG_FILE = "emulator.log"
START_COMMAND = "icestream emulator start"
NO_WRITE_LIMITS = "--no-write-limits"


@dataclass(frozen=True)
class EmulatorState:
    """What the state file records about a started emulator."""

    pid: int
    port: int
    endpoint: str
    process_start: str  # /proc start time, so a reused pid is never mistaken for ours
    started_at: float
    log: str
    write_limits: bool = True  # Kinesis's per-shard write limits enforced (icestream.kinesis.write_limits)


@dataclass(frozen=True)
class EmulatorStatus:
    """The emulator's state as seen now."""

    running: bool
    healthy: bool
    endpoint: str | None
    pid: int | None
    detail: str
    found_on_port: bool = False  # answering on the port, but started from another run folder (no state file here)


def is_healthy(endpoint: str, timeout: float = 2.0) -> bool:
    """True when a moto server answers on ``endpoint``."""
    try:
        # /moto-api/ is a small page; /moto-api/data.json would serialize every record moto holds.
        with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=timeout) as answer:  # noqa: S310 - loopback URL we built
            return answer.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class Emulator:
    """Start, stop and inspect the emulator whose state lives in ``run_dir``.

    Args:
        run_dir: Folder for the state file and the server's log.
        port: The loopback port the emulator is started on, and found on when ``run_dir`` holds no state
            file of it (one started from another run folder); None: a free port, found by the state file only.
    """

    def __init__(self, run_dir: Path, port: int | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.state_file = self.run_dir / STATE_FILE
        self.port = port

    def _read_state(self) -> EmulatorState | None:
        return processes.read_state_as(self.state_file, EmulatorState)

    def _owns(self, state: EmulatorState) -> bool:
        """True when ``state.pid`` is still the very process this module started."""
        return processes.is_ours(asdict(state), ("icestream.kinesis.emulator", str(state.port)))

    def _found_on_port(self) -> EmulatorStatus | None:
        """The emulator answering on :attr:`port`, started from another run folder; None if none answers there."""
        endpoint = f"http://{LOOPBACK}:{self.port}"
        if not self.port or not is_healthy(endpoint):
            return None
        detail = f"running (found on port {self.port}; started with another run folder, not {self.run_dir})"
        return EmulatorStatus(True, True, endpoint, None, detail, found_on_port=True)

    def status(self) -> EmulatorStatus:
        """Report whether the emulator runs and answers (this run folder's, else one found on :attr:`port`)."""
        state = self._read_state()
        if state is None or not self._owns(state):
            found = self._found_on_port()
            if found is not None:
                return found
        if state is None:
            return EmulatorStatus(False, False, None, None, f"not running; start it with `{START_COMMAND}`")
        if not self._owns(state):
            return EmulatorStatus(
                False, False, None, None, f"not running (stale state file); start it with `{START_COMMAND}`"
            )
        healthy = is_healthy(state.endpoint)
        limits = "per-shard write limits on" if state.write_limits else "write limits off"
        detail = f"running ({limits})" if healthy else "process alive but not answering; see " + state.log
        return EmulatorStatus(True, healthy, state.endpoint, state.pid, detail)

    def endpoint(self) -> str | None:
        """The endpoint of a running, healthy emulator, else None."""
        status = self.status()
        return status.endpoint if status.healthy else None

    def start(self, port: int | None = None, timeout: float = 30.0, write_limits: bool = True) -> str:
        """Start the emulator unless it already runs; return its endpoint.

        One already running is kept: this run folder's, or one found on :attr:`port` (started from another).

        Args:
            port: Loopback port to bind (default: :attr:`port`, else a free one).
            timeout: Seconds to wait for the server to answer.
            write_limits: Enforce Kinesis's per-shard write limits (:mod:`icestream.kinesis.write_limits`)
                in a server started now (one already running keeps what it was started with).

        Returns:
            The endpoint URL, e.g. ``http://127.0.0.1:45123``.

        Raises:
            EmulatorError: If the port is taken by another program, or the server does not come up.
        """
        status = self.status()
        if status.healthy and status.endpoint:
            return status.endpoint
        if status.running:
            self.stop()
        port = port or self.port or free_port()
        if port_taken(port):
            raise EmulatorError(
                f"port {port} on {LOOPBACK} is taken by a program that is not the Kinesis emulator (it does not "
                "answer moto's /moto-api/): stop that program, or start the emulator on another port with "
                "--port N or ICESTREAM_EMULATOR_PORT=N."
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        endpoint = f"http://{LOOPBACK}:{port}"
        log_path = self.run_dir / LOG_FILE
        command = [sys.executable, "-m", "icestream.kinesis.emulator", "-H", LOOPBACK, "-p", str(port)]
        if not write_limits:
            command.append(NO_WRITE_LIMITS)
        process = processes.spawn(command, log_path)
        processes.write_state(
            self.state_file,
            process.pid,
            port=port,
            endpoint=endpoint,
            started_at=time.time(),
            log=str(log_path),
            write_limits=write_limits,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self.state_file.unlink(missing_ok=True)
                raise EmulatorError(
                    f"The Kinesis emulator exited at start (code {process.returncode}); see {log_path}."
                )
            if is_healthy(endpoint, timeout=1.0):
                return endpoint
            time.sleep(0.2)
        self.stop()
        raise EmulatorError(
            f"The Kinesis emulator did not answer on {endpoint} within {timeout:.0f} s; see {log_path}."
        )

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop the emulator this module started, if any.

        Args:
            timeout: Seconds to wait after SIGTERM before SIGKILL.

        Returns:
            True if a process was stopped.
        """
        state = self._read_state()
        if state is None:
            return False
        return processes.stop_recorded(self.state_file, state.pid if self._owns(state) else None, timeout)


def main(argv: list[str] | None = None) -> None:
    """Run moto's server with its Kinesis model patched (the emulator process's entry point).

    ``--no-write-limits`` (ours; the rest goes to moto) leaves Kinesis's per-shard write limits off.
    """
    from moto.server import main as moto_main

    from icestream.kinesis import moto_kinesis
    from icestream.kinesis.write_limits import WriteLimits

    arguments = list(sys.argv[1:] if argv is None else argv)
    limits = None if NO_WRITE_LIMITS in arguments else WriteLimits()
    moto_kinesis.install(write_limits=limits)
    moto_main([argument for argument in arguments if argument != NO_WRITE_LIMITS])


if __name__ == "__main__":
    main()
