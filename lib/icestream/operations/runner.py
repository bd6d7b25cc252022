"""Run the notebooks headless with papermill, in order, the way ``make run`` and schedules do.

Each executed copy goes to the output folder (papermill records the parameters used in it);
a scheduled run names its copies with the run's start time (:func:`stamped_name`), so every run
keeps its own. A failure stops the run and is reported as the notebook, the cell and the error,
nothing more.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from icestream.config import project_home
from icestream.errors import IcestreamError, NotebookFailedError

KERNEL_NAME = "icestream"
# Set in the environment of the kernels the runner starts: nobody watches them, so what redraws for a
# reader (the live dashboard of 02) draws its last frame only (icestream.plots.live_dashboard).
HEADLESS_ENV = "ICESTREAM_HEADLESS"
KERNEL_START_SECONDS = 300  # how long a kernel may take to start and answer before the run fails


def headless() -> bool:
    """Whether this process is a kernel the runner started (``make run``, a scheduled run)."""
    return os.environ.get(HEADLESS_ENV) == "1"


@contextmanager
def _headless_kernels() -> Iterator[None]:
    """Kernels started inside this block inherit ``ICESTREAM_HEADLESS=1``; the variable is restored after."""
    before = os.environ.get(HEADLESS_ENV)
    os.environ[HEADLESS_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[HEADLESS_ENV]
        else:
            os.environ[HEADLESS_ENV] = before


class _UnionAnnotationFilter(logging.Filter):
    """Drop papermill 2.7's "Unable to parse line" for ``name: str | None = None`` parameters.

    Its parameter regex predates ``X | None`` annotations; the values are still injected (tests
    pass parameters that way), so the warning is noise on every run.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.getMessage().startswith("Unable to parse line") and "| None" in record.getMessage()
        )  # registered into the venv by `make` (python -m ipykernel install --sys-prefix)


@dataclass(frozen=True)
class NotebookRun:
    """One executed notebook."""

    notebook: str
    output: Path
    seconds: float


def stamped_name(path: Path, started: datetime, folder: Path) -> Path:
    """Where a scheduled run's executed copy of ``path`` goes: ``folder/<stem>-<UTC start>.ipynb``.

    A name already taken (two runs started within the same second) gets ``-2``, ``-3``, ...: a
    run never overwrites another's copy.

    Args:
        path: The notebook.
        started: When the run started (one time for all the notebooks of a run).
        folder: The output folder.
    """
    base = f"{path.stem}-{started.astimezone(UTC):%Y%m%dT%H%M%SZ}"
    candidate, number = folder / f"{base}{path.suffix}", 1
    while candidate.exists():
        number += 1
        candidate = folder / f"{base}-{number}{path.suffix}"
    return candidate


def notebook_paths(selected: Iterable[str] = (), folder: Path | None = None) -> list[Path]:
    """The notebooks to run, in name order (names sort into run order).

    Args:
        selected: Names or prefixes (``02`` or ``02_stream_ingest.ipynb``); empty means all.
        folder: Where the notebooks are (default ``notebooks/`` in the project).

    Raises:
        IcestreamError: If a selected name matches no notebook.
    """
    folder = folder or project_home() / "notebooks"
    every = sorted(path for path in folder.glob("[0-9][0-9]_*.ipynb"))
    chosen = list(selected)
    if not chosen:
        return every
    picked = []
    for name in chosen:
        matches = [path for path in every if path.name == name or path.name.startswith(name)]
        if not matches:
            raise IcestreamError(f"No notebook matches {name!r}; the notebooks are {', '.join(p.name for p in every)}.")
        picked.extend(path for path in matches if path not in picked)
    return sorted(picked)


def kernel_name() -> str:
    """The project's kernel when registered, else the interpreter's default kernel."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        return "python3"
    return KERNEL_NAME


def ipc_kernel_manager() -> type:
    """A kernel manager whose kernels talk over local IPC sockets instead of loopback TCP.

    Over TCP every kernel start warns "Kernel is running over TCP without encryption" (ipykernel 7),
    once per notebook of a run. The warning is right: any local user can connect to a TCP port.
    IPC sockets are files in Jupyter's runtime folder, readable by this user only.
    """
    from jupyter_client import AsyncKernelManager
    from traitlets import default

    class IpcKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        async def _async_interrupt_kernel(self) -> None:
            # jupyter_client interrupts a kernel before it asks it to shut down, with SIGINT to the
            # kernel's whole process group. When a notebook has ended the kernel is idle: the
            # interrupt only printed "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel" to
            # `make run` now and then, and reached whatever the notebook had started. A shutdown
            # request (then SIGTERM, then SIGKILL) still follows.
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return IpcKernelManager


def run_notebooks(
    notebooks: list[Path],
    output_dir: Path,
    parameters: dict[str, Any] | None = None,
    report: Callable[[str], None] = print,
    progress: bool = True,
    started: datetime | None = None,
) -> list[NotebookRun]:
    """Execute notebooks one after another with papermill.

    Args:
        notebooks: Notebook paths, in run order.
        output_dir: Where executed copies are written.
        parameters: Passed to every notebook (papermill injects them after the ``parameters`` cell).
        report: Where progress lines go.
        progress: Show papermill's per-cell progress bar.
        started: For a scheduled run, its start time: each copy is named by :func:`stamped_name`
            instead of overwriting ``output_dir/<notebook>``.

    Returns:
        One record per notebook, with its wall time.

    Raises:
        NotebookFailedError: On the first notebook that fails.
    """
    with _headless_kernels():
        return _run(notebooks, output_dir, parameters, report, progress, started)


def _run(
    notebooks: list[Path],
    output_dir: Path,
    parameters: dict[str, Any] | None,
    report: Callable[[str], None],
    progress: bool,
    started: datetime | None,
) -> list[NotebookRun]:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    output_dir.mkdir(parents=True, exist_ok=True)
    papermill_log = logging.getLogger("papermill.translators")
    if not any(isinstance(item, _UnionAnnotationFilter) for item in papermill_log.filters):
        papermill_log.addFilter(_UnionAnnotationFilter())
    kernel = kernel_name()
    runs: list[NotebookRun] = []
    run_began = time.monotonic()
    for number, path in enumerate(notebooks, start=1):
        output = output_dir / path.name if started is None else stamped_name(path, started, output_dir)
        report(f"[{number}/{len(notebooks)}] {path.name} ...")
        began = time.monotonic()
        try:
            papermill.execute_notebook(
                str(path),
                str(output),
                parameters=parameters or {},
                kernel_name=kernel,
                cwd=str(path.parent),
                progress_bar={"desc": path.stem, "leave": False} if progress else False,
                report_mode=False,
                kernel_manager_class=ipc_kernel_manager(),
                # papermill gives a kernel 60 s to answer: on 2 busy cores (a test run beside a
                # benchmark) one took longer and the run failed before its first cell.
                start_timeout=KERNEL_START_SECONDS,
            )
        except PapermillExecutionError as error:
            raise NotebookFailedError(path.name, error.cell_index, error.ename, error.evalue, output) from None
        seconds = time.monotonic() - began
        runs.append(NotebookRun(path.name, output, seconds))
        total = time.monotonic() - run_began
        report(f"[{number}/{len(notebooks)}] {path.name} done in {seconds:.1f} s (total {total:.1f} s)")
    return runs
