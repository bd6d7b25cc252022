"""The local Kinesis emulator: moto's server in a background process on a loopback port.

Run as ``python -m icestream.emulator -H 127.0.0.1 -p PORT``: moto's server with its shard
resharding made to behave like Kinesis (see :func:`faithful_resharding`).

The server runs as its own process (new session), so it outlives the papermill kernels that use
it one after another. A state file under ``data/run/`` records its pid, port and start time (see
:mod:`icestream.processes`); start is idempotent, stop ends only the process this module started
(checked by pid, start time and command line), and status reports health. moto keeps its state in
memory: stopping the emulator loses every stream and record in it.
"""

from __future__ import annotations

import hashlib
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from icestream import processes
from icestream.errors import EmulatorError

LOOPBACK = "127.0.0.1"
STATE_FILE = "emulator.json"
LOG_FILE = "emulator.log"
START_COMMAND = "icestream emulator start"


@dataclass(frozen=True)
class EmulatorState:
    """What the state file records about a started emulator."""

    pid: int
    port: int
    endpoint: str
    process_start: str  # /proc start time, so a reused pid is never mistaken for ours
    started_at: float
    log: str


@dataclass(frozen=True)
class EmulatorStatus:
    """The emulator's state as seen now."""

    running: bool
    healthy: bool
    endpoint: str | None
    pid: int | None
    detail: str


def free_port(host: str = LOOPBACK) -> int:
    """Ask the kernel for a free TCP port on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


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
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.state_file = self.run_dir / STATE_FILE

    def _read_state(self) -> EmulatorState | None:
        values = processes.read_state(self.state_file)
        try:
            return EmulatorState(**values) if values is not None else None
        except TypeError:
            return None

    def _owns(self, state: EmulatorState) -> bool:
        """True when ``state.pid`` is still the very process this module started."""
        return processes.is_ours(asdict(state), ("icestream.emulator", str(state.port)))

    def status(self) -> EmulatorStatus:
        """Report whether the emulator runs and answers."""
        state = self._read_state()
        if state is None:
            return EmulatorStatus(False, False, None, None, f"not running; start it with `{START_COMMAND}`")
        if not self._owns(state):
            return EmulatorStatus(
                False, False, None, None, f"not running (stale state file); start it with `{START_COMMAND}`"
            )
        healthy = is_healthy(state.endpoint)
        detail = "running" if healthy else "process alive but not answering; see " + state.log
        return EmulatorStatus(True, healthy, state.endpoint, state.pid, detail)

    def endpoint(self) -> str | None:
        """The endpoint of a running, healthy emulator, else None."""
        status = self.status()
        return status.endpoint if status.healthy else None

    def start(self, port: int | None = None, timeout: float = 30.0) -> str:
        """Start the emulator unless it already runs; return its endpoint.

        Args:
            port: Loopback port to bind (default: a free one).
            timeout: Seconds to wait for the server to answer.

        Returns:
            The endpoint URL, e.g. ``http://127.0.0.1:45123``.

        Raises:
            EmulatorError: If the server does not come up.
        """
        status = self.status()
        if status.healthy and status.endpoint:
            return status.endpoint
        if status.running:
            self.stop()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        endpoint = f"http://{LOOPBACK}:{port}"
        log_path = self.run_dir / LOG_FILE
        command = [sys.executable, "-m", "icestream.emulator", "-H", LOOPBACK, "-p", str(port)]
        process = processes.spawn(command, log_path)
        processes.write_state(
            self.state_file, process.pid, port=port, endpoint=endpoint, started_at=time.time(), log=str(log_path)
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
        stopped = self._owns(state)
        if stopped:
            processes.terminate(state.pid, timeout)
        self.state_file.unlink(missing_ok=True)
        return stopped


def faithful_resharding() -> None:
    """Make moto 5.2's SplitShard and MergeShards behave like Kinesis Data Streams.

    moto (checked in 5.2.5) differs from Kinesis in three ways that matter to a reader of
    resharded streams: it keeps routing new records to the closed parent (its key lookup ignores
    whether a shard is open, and misses the last key of every range); on a split it moves the
    parent's records into the children; on a merge it copies both parents' records into the child,
    so they exist twice. In Kinesis a closed shard keeps its records (readable until retention ends),
    receives nothing new, and children start empty. This replaces those three methods.
    """
    from moto.kinesis import models
    from moto.kinesis.exceptions import InvalidArgumentError

    def open_shard_for_key(self: models.Stream, partition_key: str, explicit_hash_key: str) -> models.Shard | None:
        if not isinstance(partition_key, str) or len(partition_key) > 256:
            raise InvalidArgumentError("partition_key")
        if explicit_hash_key:
            key = int(explicit_hash_key)
            if key >= 2**128:
                raise InvalidArgumentError("explicit_hash_key")
        else:
            # Kinesis maps a partition key to a shard by the MD5 hash of its UTF-8 bytes.
            key = int(hashlib.md5(partition_key.encode("utf-8"), usedforsecurity=False).hexdigest(), 16)
        return next(
            (
                shard
                for shard in self.shards.values()
                if shard.is_open and shard.starting_hash <= key <= shard.ending_hash
            ),
            None,
        )

    def next_shard_number(self: models.Stream) -> int:
        return max(shard._shard_id for shard in self.shards.values()) + 1

    def split_shard(self: models.Stream, shard_to_split: str, new_starting_hash_key: str) -> None:
        shard = self.shards[shard_to_split]
        boundary = int(new_starting_hash_key)
        if not shard.starting_hash < boundary <= shard.ending_hash or not shard.is_open:
            raise InvalidArgumentError(f"cannot split {shard_to_split} at {new_starting_hash_key}")
        number = next_shard_number(self)
        for offset, (low, high) in enumerate(((shard.starting_hash, boundary - 1), (boundary, shard.ending_hash))):
            child = models.Shard(number + offset, low, high, parent=shard.shard_id)
            self.shards[child.shard_id] = child
        shard.is_open = False

    def merge_shards(self: models.Stream, shard_to_merge: str, adjacent_shard_to_merge: str) -> None:
        first, second = self.shards[shard_to_merge], self.shards[adjacent_shard_to_merge]
        low, high = sorted((first, second), key=lambda shard: shard.starting_hash)
        if low.ending_hash + 1 != high.starting_hash or not (first.is_open and second.is_open):
            raise InvalidArgumentError(adjacent_shard_to_merge)
        child = models.Shard(
            next_shard_number(self), low.starting_hash, high.ending_hash, parent=first.shard_id,
            adjacent_parent=second.shard_id,
        )  # fmt: skip
        self.shards[child.shard_id] = child
        first.is_open = second.is_open = False

    models.Stream.get_shard_for_key = open_shard_for_key
    models.Stream.split_shard = split_shard
    models.Stream.merge_shards = merge_shards


def main(argv: list[str] | None = None) -> None:
    """Run moto's server with faithful resharding and a constant-cost record store (the emulator's entry point)."""
    from moto.server import main as moto_main

    from icestream import moto_kinesis

    faithful_resharding()
    moto_kinesis.install()
    moto_main(argv)


if __name__ == "__main__":
    main()
