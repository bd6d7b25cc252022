"""JupyterLab for the workbook, started the same way by ``make lab``, ``icestream lab`` and the browser test.

It listens on 127.0.0.1 only, opens on ``notebooks/`` (whose notebooks name the project's kernel,
"Python (icestream)"), runs as root where containers do (Jupyter refuses root unless told), and
asks nothing before the first notebook: the news consent prompt and the update check are off,
through the settings overrides of the JupyterLab installed in this environment (nothing is
written to the user's own Jupyter settings).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# JupyterLab's "Would you like to get notified about official Jupyter news?" toast and its
# update check: a learner should meet the notebooks first (the choice stays in the Settings menu).
OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
START_FOLDER = "notebooks"


def overrides_path(prefix: str = sys.prefix) -> Path:
    """The settings overrides file of the JupyterLab installed under ``prefix``."""
    return Path(prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def write_overrides(prefix: str = sys.prefix) -> Path:
    """Add this workbook's overrides to that file, keeping any others it holds; returns the file."""
    path = overrides_path(prefix)
    current: dict = {}
    if path.is_file():
        try:
            current = json.loads(path.read_text() or "{}")
        except json.JSONDecodeError:
            current = {}
    for plugin, values in OVERRIDES.items():
        current[plugin] = {**current.get(plugin, {}), **values}
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written aside, then renamed: a lab starting meanwhile (or a second test worker) never reads half a file.
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.write_text(json.dumps(current, indent=2) + "\n")
    staged.replace(path)
    return path


def lab_command(root: Path, port: int | None = None, token: str | None = None) -> list[str]:
    """The ``jupyter lab`` command line.

    Args:
        root: The project folder (the server's root; it opens on ``root/notebooks``).
        port: A port on 127.0.0.1 (default: Jupyter's, 8888 or the next free one).
        token: The access token (default: a random one, printed in the address).

    Returns:
        The command, run with this interpreter.
    """
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--ip",
        "127.0.0.1",
        "--no-browser",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.default_url=/lab/tree/{START_FOLDER}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")  # most containers run as root; the server still listens on loopback only
    if port is not None:
        command.append(f"--port={port}")
    if token is not None:
        command.append(f"--IdentityProvider.token={token}")
    return command
