"""JupyterLab started as ``make lab`` starts it, for the lab and browser tests."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from icestream.kinesis.emulator import free_port
from icestream.workbook.lab import lab_command, write_overrides
from tests.helpers.waiting import wait_until

TOKEN = "icestream-test-token"


@dataclass(frozen=True)
class Lab:
    """A running JupyterLab: its address (``http://127.0.0.1:PORT``) and its log file."""

    base: str
    log: Path

    def get(self, path: str) -> dict | None:
        """GET a JSON answer of the server (None while it does not answer)."""
        try:
            with urllib.request.urlopen(f"{self.base}{path}?token={TOKEN}", timeout=5) as answer:  # noqa: S310 - loopback
                return json.loads(answer.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def url(self, path: str) -> str:
        """The address of a page of the server, with the token."""
        return f"{self.base}{path}?token={TOKEN}"


@contextlib.contextmanager
def running_lab(root: Path, work: Path, env: dict[str, str] | None = None) -> Iterator[Lab]:
    """JupyterLab serving ``root`` on a free loopback port (``lab_command``, as ``make lab``); stopped after.

    Args:
        root: The server's root folder (it opens on ``root/notebooks``).
        work: A private folder for the server's log and runtime files.
        env: Extra environment for the server and the kernels it starts.
    """
    write_overrides()
    port = free_port()
    log = work / "lab.log"
    # A private workspace: with the user's own (~/.jupyter/lab/workspaces) a server reopens the notebooks the
    # last one had open, each starting a kernel, and writes its own tabs back into the user's layout.
    private = {
        "JUPYTER_RUNTIME_DIR": str(work / "jupyter-runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces"),
    }
    environment = {**os.environ, **private, **(env or {})}
    with log.open("w") as sink:
        process = subprocess.Popen(lab_command(root, port=port, token=TOKEN), stdout=sink, stderr=subprocess.STDOUT,
                                   env=environment)  # fmt: skip
    lab = Lab(f"http://127.0.0.1:{port}", log)
    try:

        def answering() -> dict | None:
            assert process.poll() is None, log.read_text()[-3000:]
            return lab.get("/api/status")

        wait_until(answering, 120, interval=0.25, message="JupyterLab to answer")
        yield lab
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
