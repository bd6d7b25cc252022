"""Ship what Spark executors need to run icestream's tasks, the way Spark documents it.

A read task runs icestream's code (``icestream.ingest.reading.shard_reader``) in the executors' Python, which on
a cluster is not this process's environment. Spark's Python Package Management offers two ways,
both used here, chosen by the ``ship`` setting (``ICESTREAM_SHIP``) when icestream starts a
session on a non-local master:

- ``packed`` (default): a virtual environment holding the executor-side dependencies
  (:data:`EXECUTOR_DISTRIBUTIONS` and what they need, at this interpreter's versions), packed with
  ``venv-pack`` and shipped with ``spark.archives``; executors run its Python
  (``spark.pyspark.python``). icestream itself goes as a zip on ``spark.submit.pyFiles``. Nodes
  need only this Python interpreter at the same path: venv-pack links to it, it does not copy it.
- ``package``: only the zip; the nodes' Python must already hold :func:`pinned_requirements`.
- ``none``: nothing; icestream is installed on the nodes.

pyspark is never packed (Spark puts its own ``pyspark.zip`` on every executor's path). Both
artifacts are built once under ``ship_cache_dir``, named by a hash of what they hold (the
package's files; the pinned requirements and the interpreter), so a change rebuilds only what changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icestream.config import Settings
from icestream.errors import ExecutorImportError, ShipError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# What a read task imports (boto3 and msgspec; yaml and numpy through icestream's modules) and what
# pyspark's Arrow and pandas workers import on executors.
EXECUTOR_DISTRIBUTIONS = ("boto3", "msgspec", "PyYAML", "numpy", "pyarrow", "pandas", "py4j")
PYSPARK_DISTRIBUTIONS = ("py4j", "numpy", "pyarrow", "pandas")
VENV_PACK = "venv-pack==0.2.0"  # the packer Spark's documentation names for virtual environments
ENV_ALIAS = "icestream_env"  # the folder the archive unpacks to in each executor's working directory
EXECUTOR_PYTHON = f"./{ENV_ALIAS}/bin/python"
PACKAGE = Path(__file__).resolve().parents[1]  # the icestream package, shipped whole
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_MISSING_MODULE = re.compile(r"No module named '([^']+)'")
_MISSING_PYTHON = re.compile(r'Cannot run program "([^"]+)"')


@dataclass(frozen=True)
class ShipPlan:
    """What a session ships: Spark settings, and environment variables pyspark reads at start."""

    mode: str
    conf: dict[str, str] = field(default_factory=dict)
    # pyspark takes the executors' Python from PYSPARK_PYTHON when the SparkContext starts.
    environ: dict[str, str] = field(default_factory=dict)
    artifacts: tuple[Path, ...] = ()


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_requirements(roots: Sequence[str] = EXECUTOR_DISTRIBUTIONS) -> tuple[str, ...]:
    """``name==version`` for ``roots`` and everything they require, as installed in this Python.

    Args:
        roots: Distribution names.

    Returns:
        Sorted pins of the whole closure (extras left out), so an environment built from them
        with ``--no-deps`` holds exactly this interpreter's versions.

    Raises:
        ShipError: If a root is not installed here.
    """
    pins: dict[str, str] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            if name in roots:
                raise ShipError(f"{name} is not installed in {sys.executable}; run `make run`.") from None
            continue  # required only on other platforms (a marker): not installed, not needed
        key = _canonical(distribution.metadata["Name"])
        if key in pins:
            continue
        pins[key] = f"{distribution.metadata['Name']}=={distribution.version}"
        for requirement in distribution.requires or ():
            match = _REQUIREMENT_NAME.match(requirement)
            if match and "extra" not in requirement.partition(";")[2]:
                pending.append(match.group(1))
    return tuple(sorted(pins.values(), key=str.lower))


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()[:12]


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One builder at a time per cache folder (test drivers and notebooks may start together)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def package_zip(settings: Settings) -> Path:
    """icestream's own files as a zip for ``spark.submit.pyFiles`` (``--py-files``), built once.

    Args:
        settings: Supplies ``ship_cache_dir``.

    Returns:
        The zip, named by a hash of the package's files.
    """
    files = sorted(
        path
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")
    )
    names = [f"{PACKAGE.name}/{path.relative_to(PACKAGE).as_posix()}" for path in files]
    key = _digest(*[name.encode() for name in names], *[path.read_bytes() for path in files])
    cache = settings.path("ship_cache_dir")
    target = cache / f"icestream-{key}.zip"
    if target.is_file():
        return target
    with _locked(cache), tempfile.TemporaryDirectory(dir=cache) as scratch:
        partial = Path(scratch) / target.name
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, path in zip(names, files, strict=True):
                archive.write(path, name)
        os.replace(partial, target)  # readers never see a half-written zip
    return target


def base_python() -> str:
    """The interpreter new environments are made from (this venv's base Python, or this Python)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def _run(command: Sequence[str | os.PathLike[str]], what: str) -> None:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise ShipError(
            f"{what} failed: {' | '.join(detail)}. PyPI must be reachable the first time (later runs reuse "
            "the cache), or set ICESTREAM_SHIP=package or none and provide the dependencies on the nodes."
        )


def make_venv(path: Path, requirements: Sequence[str]) -> Path:
    """Create a virtual environment at ``path`` holding exactly ``requirements``.

    Args:
        path: A folder that does not exist yet.
        requirements: Pins of a whole closure (:func:`pinned_requirements`): installed with
            ``--no-deps``, so nothing is resolved and nothing else comes in.

    Returns:
        The environment's Python.

    Raises:
        ShipError: If the environment cannot be created or a requirement cannot be installed.
    """
    python = path / "bin" / "python"
    install = installer(python)
    own_pip = install[0] == str(python)  # else uv installs from outside: the environment needs no pip
    _run([base_python(), "-m", "venv", *([] if own_pip else ["--without-pip"]), path], f"creating {path}")
    _run([*install, *requirements], f"installing {len(requirements)} packages into {path}")
    return python


def installer(python: Path) -> list[str]:
    """The command that installs packages into the environment of ``python``, without their dependencies.

    uv when it sits beside this interpreter (``make`` installs it: it fills an environment in seconds
    where pip takes half a minute) or on ``PATH``; otherwise that environment's pip. uv reads its
    package index from ``UV_INDEX_URL`` or ``uv.toml``, not from pip's configuration.
    """
    beside = Path(sys.executable).with_name("uv")
    uv = str(beside) if beside.is_file() else shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--python", str(python), "--quiet", "--no-deps"]
    return [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-input", "--disable-pip-version-check"]


def packed_environment(settings: Settings, with_package: bool = False, python_prefix: str | None = None) -> Path:
    """The executors' environment packed with venv-pack (a ``.tar.gz`` for ``spark.archives``), built once.

    Args:
        settings: Supplies ``ship_cache_dir``.
        with_package: Put icestream itself inside (a platform's job has no ``--py-files``: the driver
            and executors import icestream from the archive).
        python_prefix: Where the target's Python lives (e.g. ``/usr`` for an EMR image's
            ``/usr/bin/python3.11``): the environment's ``bin/python*`` link there; None keeps this machine's.

    Returns:
        The archive, named by the Python version and a hash of the interpreter and the pins.

    Raises:
        ShipError: If it cannot be built.
    """
    requirements = pinned_requirements()
    interpreter = [sys.version, base_python(), platform.machine(), VENV_PACK, *requirements]
    if with_package or python_prefix:  # the package by its zip's name, which hashes its files
        interpreter += [package_zip(settings).name if with_package else "", python_prefix or ""]
    key = _digest(json.dumps(interpreter).encode())
    cache = settings.path("ship_cache_dir")
    kind = "job" if with_package else "executor"
    target = cache / f"{kind}-env-py{sys.version_info.major}{sys.version_info.minor}-{key}.tar.gz"
    if target.is_file():
        return target
    with _locked(cache):
        if target.is_file():  # another process built it while this one waited
            return target
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            environment = Path(scratch) / "env"
            make_venv(environment, (*requirements, VENV_PACK))
            if with_package:
                version = f"python{sys.version_info.major}.{sys.version_info.minor}"
                site = environment / "lib" / version / "site-packages" / PACKAGE.name
                shutil.copytree(PACKAGE, site, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            if python_prefix:  # the interpreter link, to where the target has it (venv-pack keeps absolute links)
                interpreter_name = f"python{sys.version_info.major}.{sys.version_info.minor}"
                for link in (environment / "bin").glob("python*"):
                    if link.is_symlink() and Path(os.readlink(link)).is_absolute():
                        link.unlink()
                        link.symlink_to(Path(python_prefix) / "bin" / interpreter_name)
            partial = Path(scratch) / target.name
            # Level 1: the archive is built once but unpacked by every executor of every application.
            _run(
                [
                    environment / "bin" / "venv-pack",
                    "--prefix",
                    environment,
                    "--output",
                    partial,
                    "--compress-level",
                    "1",
                    "--quiet",
                ],
                "packing the executor environment with venv-pack",
            )
            partial.chmod(0o644)  # venv-pack writes it private; Spark's file server and other users read it
            os.replace(partial, target)
    return target


def ship_plan(settings: Settings) -> ShipPlan:
    """What a session that icestream starts on ``settings.spark_master`` ships to its executors.

    Args:
        settings: ``ship`` and ``spark_master`` decide; local masters ship nothing.

    Returns:
        The plan (building the artifacts when they are not cached yet).

    Raises:
        ShipError: If an artifact cannot be built.
    """
    if settings.local_master or settings.ship == "none":
        return ShipPlan("none")
    package = package_zip(settings)
    conf = {"spark.submit.pyFiles": str(package)}
    if settings.ship == "package":
        return ShipPlan("package", conf, artifacts=(package,))
    environment = packed_environment(settings)
    conf |= {"spark.archives": f"{environment}#{ENV_ALIAS}", "spark.pyspark.python": EXECUTOR_PYTHON}
    return ShipPlan("packed", conf, {"PYSPARK_PYTHON": EXECUTOR_PYTHON}, (package, environment))


def submit_arguments(plan: ShipPlan) -> list[str]:
    """``spark-submit`` options that ship the same as ``plan`` (client deploy mode).

    Args:
        plan: From :func:`ship_plan`.

    Returns:
        Arguments such as ``--archives``, ``--py-files`` and ``--conf spark.pyspark.python=...``.
    """
    arguments = []
    if "spark.archives" in plan.conf:
        arguments += ["--archives", plan.conf["spark.archives"]]
    if "spark.submit.pyFiles" in plan.conf:
        arguments += ["--py-files", plan.conf["spark.submit.pyFiles"]]
    if "spark.pyspark.python" in plan.conf:
        # The driver stays in this Python; without the second setting it would look for the archive here too.
        arguments += ["--conf", f"spark.pyspark.python={EXECUTOR_PYTHON}"]
        arguments += ["--conf", f"spark.pyspark.driver.python={sys.executable}"]
    return arguments


def _advice(settings: Settings) -> str:
    if settings.local_master:
        return f"a local master's executors run PYSPARK_PYTHON (default {sys.executable}): point it at this Python"
    if settings.ship == "none":
        return (
            "set ICESTREAM_SHIP=packed to ship a packed environment with icestream and its dependencies, "
            "or install icestream on every node (under spark-submit, add the options `icestream ship` prints)"
        )
    if settings.ship == "package":
        return (
            "ICESTREAM_SHIP=package ships icestream only: install its executor requirements on the nodes "
            "(`icestream ship --requirements` lists them), or set ICESTREAM_SHIP=packed"
        )
    return (
        f"the packed environment links to {base_python()} (Python {platform.python_version()}), which every "
        "node needs at the same path; otherwise set ICESTREAM_SHIP=package and install the requirements there"
    )


def executor_import_error(
    error: BaseException, settings: Settings, master: str | None = None
) -> ExecutorImportError | None:
    """Recognise a task that failed because the executors' Python lacks a module (or is missing).

    Args:
        error: What a Spark action raised.
        settings: Which ship mode was in use (the message says what to change).
        master: The session's real master (``SparkContext.master``), when it may differ from the settings'.

    Returns:
        One clear error to raise instead of the worker's traceback, or None for any other failure.
    """
    if master is not None and master != settings.spark_master:
        settings = dataclasses.replace(settings, spark_master=master)
    text = str(error)
    module = _MISSING_MODULE.search(text)
    if module:
        return ExecutorImportError(
            f"Spark executors cannot import {module.group(1)!r} (ModuleNotFoundError in a task on master "
            f"{settings.spark_master}, ICESTREAM_SHIP={settings.ship}): {_advice(settings)}."
        )
    program = _MISSING_PYTHON.search(text)
    if program:
        return ExecutorImportError(
            f"Spark executors cannot start Python {program.group(1)!r} (master {settings.spark_master}, "
            f"ICESTREAM_SHIP={settings.ship}): {_advice(settings)}."
        )
    return None


def raise_if_executor_import_failed(error: BaseException, settings: Settings, master: str | None = None) -> None:
    """Raise :func:`executor_import_error`'s one-line error for ``error`` when it applies.

    Raises:
        ExecutorImportError: If the executors' Python lacks icestream or a dependency.
    """
    explained = executor_import_error(error, settings, master)
    if explained is not None:
        raise explained from None


def _wait_for_executors(spark: SparkSession, timeout: float) -> int:
    """Executors registered with the driver (0 for a local master), waiting up to ``timeout`` for one."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout
    while True:
        executors = len(tracker.getExecutorInfos()) - 1  # the driver is listed too
        if executors > 0 or time.monotonic() >= deadline:
            return executors
        time.sleep(0.5)


def check_executors(spark: SparkSession, settings: Settings, timeout: float = 60.0) -> str:
    """Run a small job that imports icestream's read path in the executors' Python.

    Args:
        spark: The session.
        settings: Its settings (for the advice in an error).
        timeout: Seconds to wait for a first executor on a cluster.

    Returns:
        A one-line summary: tasks, executors and their Python.

    Raises:
        ExecutorImportError: If an executor cannot import it, or cannot start Python.
    """

    def probe(_: Iterable[Any]) -> Iterator[tuple[str, str, str]]:
        # Nested, so cloudpickle ships it by value: it runs even where icestream is missing.
        import importlib
        import platform
        import socket

        try:
            importlib.import_module("icestream.ingest.reading.shard_reader")
            problem = ""
        except ImportError as error:
            problem = f"{type(error).__name__}: {error}"
        yield socket.gethostname(), f"Python {platform.python_version()}", problem

    settings = dataclasses.replace(settings, spark_master=spark.sparkContext.master or settings.spark_master)
    executors = 0 if settings.local_master else _wait_for_executors(spark, timeout)
    slots = max(2, spark.sparkContext.defaultParallelism)
    try:
        results = spark.sparkContext.parallelize(range(slots), slots).mapPartitions(probe).collect()
    except Exception as error:
        raise_if_executor_import_failed(error, settings)
        raise
    problems = sorted({problem for _host, _python, problem in results if problem})
    if problems:
        raise ExecutorImportError(
            f"executors cannot import icestream ({problems[0]}) on master {settings.spark_master}, "
            f"ICESTREAM_SHIP={settings.ship}: {_advice(settings)}."
        )
    hosts = sorted({host for host, _python, _problem in results})
    pythons = sorted({python for _host, python, _problem in results})
    where = "in the driver's JVM" if settings.local_master else f"on {executors} executor(s)"
    return f"{len(results)} tasks {where} ({len(hosts)} host(s), {', '.join(pythons)}) import icestream"
