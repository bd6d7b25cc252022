"""Background processes this project starts (the emulator, the background producer), and only those.

Each runs in its own session, so it outlives the notebook kernel or shell that started it, with its
output in a log file. A JSON state file records its pid and its start time (from ``/proc``), so a
pid the system has since given to another process is never taken for ours: :func:`is_ours` also
checks that the command line holds the words its starter expects. :func:`terminate` sends SIGTERM to
the process group, waits, then SIGKILL; :func:`reap` collects an exit status when the process is our
own child, so it leaves no zombie. Where ``/proc`` is missing (macOS) the start-time and
command-line checks are skipped and a live pid counts as ours.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

_POLL_SECONDS = 0.1
_KILL_WAIT_SECONDS = 2.0  # after SIGKILL, how long to wait for the exit before reaping anyway


T = TypeVar("T")


def start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot ('' if unknown or gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may contain spaces; fields after its closing parenthesis are fixed.
    return stat.rsplit(")", 1)[1].split()[19]


def alive(pid: int) -> bool:
    """True while a process with this pid exists (a zombie too: see :func:`running`)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by another user
    return True


def is_zombie(pid: int) -> bool:
    """True for a process that has ended but not been collected by its parent (another kernel)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def reap(pid: int) -> bool:
    """Collect the exit status when ``pid`` is our own child that has ended; True if it was collected."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False  # not our child (or already collected)
    return done == pid


def running(pid: int) -> bool:
    """True while ``pid`` runs: collects it first if it is our ended child, and counts a zombie as ended."""
    reap(pid)
    return alive(pid) and not is_zombie(pid)


def spawn(command: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own session, its output appended to ``log``.

    Args:
        command: The program and its arguments.
        log: The log file (stdout and stderr).
        env: The environment (default: this process's).

    Returns:
        The process; its pid is also its process group id.
    """
    with log.open("ab") as output:
        return subprocess.Popen(
            list(command),
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            start_new_session=True,  # not ended with the kernel or shell that started it
        )


def write_state(path: Path, pid: int, **details: Any) -> dict[str, Any]:
    """Record a started process in a JSON state file: its pid, its start time and ``details``.

    Args:
        path: The state file.
        pid: The process.
        **details: Anything else its starter wants to find again (JSON-ready values).

    Returns:
        What was written: ``pid``, ``process_start`` and the details.
    """
    state = {"pid": pid, "process_start": start_time(pid), **details}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2))
    return state


def read_state(path: Path) -> dict[str, Any] | None:
    """The state written by :func:`write_state`, or None when the file is missing or unreadable."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def read_state_as(path: Path, kind: Callable[..., T]) -> T | None:
    """The state file at ``path`` read into ``kind`` (a dataclass of its keys); None if absent or of another shape."""
    values = read_state(path)
    try:
        return kind(**values) if values is not None else None
    except TypeError:
        return None


def is_ours(state: Mapping[str, Any], marks: Sequence[str]) -> bool:
    """True when the state's pid still is the process that was recorded: "is this still my process".

    Args:
        state: A state with ``pid`` and ``process_start`` (see :func:`write_state`).
        marks: Words the process's command line must contain (e.g. the module it runs).

    Returns:
        False when the process has ended, is a zombie, started at another time than recorded (the pid
        was reused) or runs another command.
    """
    pid = int(state.get("pid") or 0)
    if pid <= 0 or not running(pid):
        return False
    current = start_time(pid)
    if current and current != state.get("process_start"):
        return False
    command = command_line(pid)
    if command is None:
        return True  # no /proc: the pid is alive and the start check was skipped
    if not command and current:
        # Its start time is the recorded one, so it is our process, caught inside exec(): the
        # kernel closes the starter's pipe (Popen returns) before it sets the new command line.
        return True
    return all(mark in command for mark in marks)


def command_line(pid: int) -> str | None:
    """The process's command line, words joined by spaces ('' while it is inside exec(); None without /proc)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def terminate(pid: int, timeout: float) -> None:
    """Stop the process group ``pid`` leads: SIGTERM, then SIGKILL if it still runs after ``timeout`` s.

    Call it only for a process :func:`is_ours` confirmed. It returns once the process has ended (and
    was collected, when it is our child), or shortly after SIGKILL.

    Args:
        pid: The process, started by :func:`spawn` (so its pid is its process group id).
        timeout: Seconds to wait after SIGTERM.
    """
    for sent, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, _KILL_WAIT_SECONDS)):
        try:
            os.killpg(pid, sent)
        except ProcessLookupError:
            return  # ended in between
        deadline = time.monotonic() + wait
        while running(pid):
            if time.monotonic() >= deadline:
                break
            time.sleep(_POLL_SECONDS)
        else:
            return
    reap(pid)


LOOPBACK = "127.0.0.1"  # every server this project starts binds here only


def free_port(host: str = LOOPBACK) -> int:
    """Ask the kernel for a free TCP port on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def port_taken(port: int, host: str = LOOPBACK) -> bool:
    """True when a program listens on ``host:port``, so a server started there could not bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the servers bind (SO_REUSEADDR): connections left in TIME_WAIT do not hold the port.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def stop_recorded(state_file: Path, pid: int | None, timeout: float) -> bool:
    """End a background process recorded in ``state_file`` and forget the record.

    Args:
        state_file: Its state file (:func:`write_state`), removed whatever happens.
        pid: The recorded process, confirmed by :func:`is_ours`; None when the record is stale or
            names a process that is not ours (nothing is signalled then).
        timeout: Seconds to wait after SIGTERM (:func:`terminate`).

    Returns:
        True if a process was stopped.
    """
    if pid is not None:
        terminate(pid, timeout)
    state_file.unlink(missing_ok=True)
    return pid is not None
