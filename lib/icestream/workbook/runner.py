"""Run the notebooks headless with papermill, in order, the way ``make run`` and schedules do.

Each executed copy goes to the output folder (papermill records the parameters used in it);
a scheduled run names its copies with the run's start time (:func:`stamped_name`), so every run
keeps its own. A failure stops the run and is reported as the notebook, the cell and the error,
nothing more.

The notebooks of one run share one kernel, and so one Spark driver: a kernel and a JVM cost each
notebook 8-20 s before its first own cell (most of a short notebook's time). Between two notebooks
the kernel is brought back to how a new one starts (:func:`start_afresh`: an empty namespace,
execution counts from 1, Spark's runtime settings, temporary views and cache cleared, no figure
open), so a notebook that leans on what the one before it left fails here as it would alone.
``kernel_per_notebook=True`` (``icestream run --kernel-per-notebook``) starts one kernel each, as
JupyterLab does for a reader.
"""

from __future__ import annotations

import ast
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
from icestream.errors import IcestreamError, NotebookFailedError, ParameterError
from icestream.validation import did_you_mean, nearest_name

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
    picked: list[Path] = []
    for name in chosen:
        matches = [path for path in every if path.name == name or path.name.startswith(name)]
        if not matches:
            raise IcestreamError(f"No notebook matches {name!r}; the notebooks are {', '.join(p.name for p in every)}.")
        picked.extend(path for path in matches if path not in picked)
    return sorted(picked)


def notebook_parameters(path: Path) -> tuple[str, ...] | None:
    """The names a notebook's ``parameters`` cell declares, in order; None when it has no such cell.

    Read from the cell's code, not with ``papermill.inspect_notebook``: papermill 2.7's parser skips
    ``name: str | None = None`` (see :class:`_UnionAnnotationFilter`), so it would call such a parameter unknown.

    Raises:
        IcestreamError: If the notebook cannot be read, or its parameters cell is not Python.
    """
    import nbformat

    try:
        cells = nbformat.read(path, as_version=4).cells
    except (OSError, ValueError) as error:  # nbformat's NotJSONError is a ValueError
        raise IcestreamError(f"{path.name} cannot be read as a notebook ({error}).") from None
    cell = next((cell for cell in cells if "parameters" in cell.metadata.get("tags", [])), None)
    if cell is None:
        return None
    try:
        tree = ast.parse(cell.source)
    except SyntaxError as error:
        raise IcestreamError(
            f"{path.name}: its parameters cell is not Python ({error.msg}, line {error.lineno}): fix the notebook."
        ) from None
    names: list[str] = []
    for statement in tree.body:
        targets = [statement.target] if isinstance(statement, ast.AnnAssign) else getattr(statement, "targets", [])
        names += [target.id for target in targets if isinstance(target, ast.Name) and target.id not in names]
    return tuple(names)


def notebook_arguments(
    notebooks: list[Path],
    parameters: dict[str, Any] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
) -> dict[Path, dict[str, Any]]:
    """What each notebook is given: the ``parameters`` its ``parameters`` cell declares, then its ``overrides``.

    Papermill runs a notebook handed a name its cell does not declare with the default, logging only
    "Passed unknown parameter" inside its progress bar: a typo (``-p shard_cuont 2``) went unseen. So a
    name is checked before anything runs. One given to every notebook goes to those that declare it
    (``stream_name`` to the notebooks that have one), and is refused when none of them does; an
    override is refused when its notebook does not declare it.

    Args:
        notebooks: The run's notebooks.
        parameters: Given to every notebook (``icestream run -p``).
        overrides: Given to some notebooks only, by name or prefix, over ``parameters``.

    Returns:
        Each notebook with its parameters, in the order of ``notebooks``.

    Raises:
        ParameterError: For a name that no notebook it is given to declares, naming the nearest that one does.
    """
    declared = {path: notebook_parameters(path) for path in notebooks}
    given = parameters or {}
    for name in given:
        if not any(name in (names or ()) for names in declared.values()):
            raise _unknown_parameter(name, declared)
    chosen: dict[Path, dict[str, Any]] = {}
    for path, names in declared.items():
        own = _overrides_for(path, overrides or {})
        for name in own:
            if name not in (names or ()):
                raise _unknown_parameter(name, {path: names})
        chosen[path] = {**{name: value for name, value in given.items() if name in (names or ())}, **own}
    return chosen


def _unknown_parameter(name: str, declared: dict[Path, tuple[str, ...] | None]) -> ParameterError:
    """The error for ``name``, which none of ``declared`` (notebook: its parameters) declares."""
    if len(declared) == 1:
        ((path, names),) = declared.items()
        if names is None:
            return ParameterError(f"{name} is not a parameter of {path.name} (it has no parameters cell).")
        return ParameterError(
            f"{name} is not a parameter of {path.name}{did_you_mean(name, names) or '.'} "
            f"Its parameters are {', '.join(names) or 'none'}."
        )
    nearest = nearest_name(name, sorted({known for names in declared.values() for known in names or ()}))
    if nearest is None:
        return ParameterError(
            f"{name} is not a parameter of any notebook of this run ({len(declared)} notebooks); "
            "each notebook's first code cell lists its parameters."
        )
    having = [path.name for path, names in declared.items() if nearest in (names or ())]
    return ParameterError(
        f"{name} is not a parameter of any notebook of this run; did you mean {nearest} ({', '.join(having)})?"
    )


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

        @default("ip")
        def _ip_default(self) -> str:
            # jupyter_client names the sockets after the connection file, or "kernel-ipc" when none is
            # written yet, as when a run makes its manager before the kernel starts: a path relative to
            # the kernel's folder, which a client in another folder cannot find. Always absolute here.
            from uuid import uuid4

            from jupyter_core.paths import jupyter_runtime_dir

            Path(jupyter_runtime_dir()).mkdir(parents=True, exist_ok=True)
            return str(Path(jupyter_runtime_dir()) / f"kernel-{uuid4()}-ipc")

        async def _async_interrupt_kernel(self) -> None:
            # jupyter_client interrupts a kernel before it asks it to shut down, with SIGINT to the
            # kernel's whole process group. When a notebook has ended the kernel is idle: the
            # interrupt only printed "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel" to
            # `make run` now and then, and reached whatever the notebook had started. A shutdown
            # request (then SIGTERM, then SIGKILL) still follows.
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return IpcKernelManager


def start_afresh() -> None:
    """In a kernel the runner shares between notebooks: make it look as a new kernel does to the next one.

    Runs inside the kernel, after a notebook has ended. A streaming query still running is an error of
    the notebook that started it (a reader's kernel would keep it running too): it is stopped and
    named, so the next notebook does not share the JVM with it.

    Raises:
        NotebookLeftoverError: If a streaming query was still active (after stopping it).
    """
    import sys

    from IPython import get_ipython

    if "pyspark" in sys.modules:  # only a notebook that used Spark can have left something in it
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is not None:
            running = [query.name or str(query.id) for query in spark.streams.active]
            for query in spark.streams.active:
                query.stop()
            for table in spark.catalog.listTables():
                if table.isTemporary:
                    spark.catalog.dropTempView(table.name)
            spark.catalog.clearCache()
            _forget_table_metadata(spark)
            spark.sql("RESET")  # runtime settings back to the session's start (spark.wap.branch, ...)
            if running:
                raise NotebookLeftoverError(f"streaming queries still running after the notebook: {running}")
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
    if "icestream.lake.statement" in sys.modules:
        sys.modules["icestream.lake.statement"].show_statements(False)
    get_ipython().reset(new_session=True)  # the namespace emptied, execution counts from 1


def _forget_table_metadata(spark: Any) -> None:
    """Drop the Iceberg catalog's cached metadata of the tables an ingest writes, as a new JVM starts without it.

    The catalog keeps each table it loaded while it is used (Iceberg's caching catalog): a table
    another process committed to since (an ``icestream ingest`` in a terminal) would be read as of
    the cached snapshot. The notebooks' other tables are their own, made anew by the notebook that
    uses them. Named, not listed: listing a namespace needs a permission the notebooks never use.
    """
    from icestream.config import load_settings

    settings = load_settings()
    if spark.conf.get(f"spark.sql.catalog.{settings.catalog}", None) is None:
        return
    for name in (settings.table_name, settings.rejects_table_name, settings.metrics_table_name):
        if spark.catalog.tableExists(name):
            spark.catalog.refreshTable(name)


class NotebookLeftoverError(IcestreamError):
    """A notebook left work running in the kernel the runner shares with the next notebook."""


def run_notebooks(
    notebooks: list[Path],
    output_dir: Path,
    parameters: dict[str, Any] | None = None,
    report: Callable[[str], None] = print,
    progress: bool = True,
    started: datetime | None = None,
    kernel_per_notebook: bool = False,
    overrides: dict[str, dict[str, Any]] | None = None,
) -> list[NotebookRun]:
    """Execute notebooks one after another with papermill.

    Args:
        notebooks: Notebook paths, in run order.
        output_dir: Where executed copies are written.
        parameters: Passed to every notebook whose ``parameters`` cell declares them (papermill injects them
            after that cell); a name none declares is refused.
        report: Where progress lines go.
        progress: Show papermill's per-cell progress bar.
        started: For a scheduled run, its start time: each copy is named by :func:`stamped_name`
            instead of overwriting ``output_dir/<notebook>``.
        kernel_per_notebook: Start a kernel for each notebook instead of sharing one (see the module).
        overrides: Parameters for some notebooks only, by name or prefix (``{"05": {"reads": 1}}``),
            over ``parameters``.

    Returns:
        One record per notebook, with its wall time.

    Raises:
        ParameterError: Before anything runs, for a parameter no notebook declares (:func:`notebook_arguments`).
        NotebookFailedError: On the first notebook that fails.
    """
    chosen = notebook_arguments(notebooks, parameters, overrides)
    with _headless_kernels(), _kernel(shared=not kernel_per_notebook) as shared:
        return _run(chosen, output_dir, report, progress, started, shared)


def _overrides_for(path: Path, overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    picked: dict[str, Any] = {}
    for name, values in overrides.items():
        if path.name == name or path.name.startswith(name):
            picked.update(values)
    return picked


@contextmanager
def _kernel(shared: bool) -> Iterator[Any]:
    """One kernel manager for the whole run (its kernel starts with the first notebook), shut down at the end."""
    if not shared:
        yield None
        return
    from jupyter_core.utils import run_sync

    manager = ipc_kernel_manager()(kernel_name=kernel_name())
    try:
        yield manager
    finally:
        if manager.has_kernel:
            run_sync(manager.shutdown_kernel)(now=False)


def _afresh(manager: Any, after: str) -> None:
    """Run :func:`start_afresh` in the shared kernel, after the notebook named ``after``."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    cell = nbformat.v4.new_code_cell("from icestream.workbook.runner import start_afresh\nstart_afresh()")
    client = NotebookClient(nbformat.v4.new_notebook(cells=[cell]), km=manager, timeout=KERNEL_START_SECONDS)
    try:
        client.execute()  # the kernel is the run's: nbclient leaves a kernel it was handed running
    except CellExecutionError as error:
        raise NotebookLeftoverError(f"{after}: {str(error).strip().splitlines()[-1]}") from None
    finally:
        if client.kc is not None:
            client.kc.stop_channels()


def _run(
    notebooks: dict[Path, dict[str, Any]],
    output_dir: Path,
    report: Callable[[str], None],
    progress: bool,
    started: datetime | None,
    shared: Any,
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
    for number, (path, parameters) in enumerate(notebooks.items(), start=1):
        output = output_dir / path.name if started is None else stamped_name(path, started, output_dir)
        report(f"[{number}/{len(notebooks)}] {path.name} ...")
        began = time.monotonic()
        if shared is not None and shared.has_kernel:
            _afresh(shared, after=runs[-1].notebook)
        kernel_options = {"km": shared} if shared is not None else {"kernel_manager_class": ipc_kernel_manager()}
        try:
            papermill.execute_notebook(
                str(path),
                str(output),
                parameters=parameters,
                kernel_name=kernel,
                cwd=str(path.parent),
                progress_bar={"desc": path.stem, "leave": False} if progress else False,
                report_mode=False,
                **kernel_options,
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
