"""A class data sharing archive for the driver JVM: Spark's classes mapped from a file, not loaded anew.

A driver JVM loads, links and verifies about 15,600 classes (Spark, Hadoop, Iceberg, the catalog's
JDBC driver) by its first query. Java's application class data sharing (JDK 13+,
``-XX:ArchiveClassesAtExit`` / ``-XX:SharedArchiveFile``) keeps them parsed and verified in an
archive that the next JVM maps in: a session plus its first catalog query took 5.26 s with it and
9.33 s without (``bench/bench_startup.py``, docs/performance.md). Every notebook kernel, CLI
command and test driver starts such a JVM.

``make setup`` builds the archive once (:func:`build`, about a minute: one throw-away session runs
the kind of work the workbook does, and its JVM writes the classes it loaded when it exits). A
session :func:`~icestream.runtime.spark.get_spark` starts then maps it in (:func:`driver_options`).
The archive belongs to one Java build and the jars its classes came from: Spark's own, the
``spark.driver.extraClassPath`` entries and the ``spark.jars`` ones (the Iceberg runtime and the
SQLite driver, whose classes the archive holds too). Its name carries a digest of them all, so a
new Java, Spark or Iceberg jar needs a new archive, which ``make setup`` builds; each Spark line
keeps its own. Should the JVM still refuse it, it starts as it would without one (``-Xshare:auto``)
and says nothing: the archive only ever saves time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from icestream.config import Settings

# Set in the environment of the process that builds the archive: its driver JVM writes the archive
# there when it exits, instead of mapping one in.
BUILD_TARGET_VARIABLE = "ICESTREAM_CDS_BUILD_TARGET"
ARCHIVE_FOLDER = "cds"
# A JVM that cannot use an archive (another Java, another class path) warns on stdout under the
# cds tags (and class+path for a class path mismatch); it then runs without, as it always could.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"
BUILD_TIMEOUT_SECONDS = 600
# A JVM that maps this archive and also runs an agent hooking class loading (Java Flight Recorder,
# a profiler or monitoring agent) crashed here in KlassFactory::check_shared_class_file_load_hook
# (OpenJDK 17.0.15): with any of these in its options the archive is left out. So is a JVM whose
# options already choose class data sharing themselves.
CONFLICTING_OPTIONS = (
    "-javaagent",
    "-agentlib",
    "-agentpath",
    "StartFlightRecording",
    "FlightRecorder",
    "SharedArchiveFile",
    "ArchiveClassesAtExit",
    "-Xshare",
)
JAVA_OPTION_VARIABLES = (
    "SPARK_SUBMIT_OPTS",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    "PYSPARK_SUBMIT_ARGS",
)


def _java_binary() -> Path | None:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    return Path(java).resolve() if java and Path(java).exists() else None


def _identity(path: Path) -> str:
    try:
        facts = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{facts.st_size}:{int(facts.st_mtime)}"


def archive_key(extra_class_path: str = "", jars: str = "") -> str | None:
    """A digest of what an archive is only valid for: the Java build and the jars the driver loads.

    Args:
        extra_class_path: ``spark.driver.extraClassPath`` of the session (it joins the class path).
        jars: ``spark.jars`` of the session, comma-separated (Spark's own class loader reads them).

    Returns:
        16 hex digits, or None when Java or Spark cannot be found (then no archive is used).
    """
    java = _java_binary()
    if java is None:
        return None
    try:
        from pyspark.find_spark_home import _find_spark_home
    except ImportError:
        return None
    spark_jars = Path(_find_spark_home()) / "jars"
    if not spark_jars.is_dir():
        return None
    facts = [_identity(java), *(_identity(path) for path in sorted(java.parents[1].glob("lib/server/*.so")))]
    # Size and time of each, as the JVM checks them: a reinstalled pyspark (the same names, new times) made the
    # JVM refuse the archive without a word, and every driver started at its old cost.
    facts += [_identity(path) for path in sorted(spark_jars.glob("*.jar"))]
    facts += [_identity(Path(entry)) for entry in extra_class_path.split(os.pathsep) if entry]
    facts += [_identity(Path(entry)) for entry in jars.split(",") if entry]
    return hashlib.sha256("\n".join(facts).encode()).hexdigest()[:16]


def archive_path(cache_dir: Path, extra_class_path: str = "", jars: str = "") -> Path | None:
    """Where the archive for this Java and these jars lives (it may not exist yet); None without Java.

    Its name starts with the Spark line (``driver-4.1-<key>.jsa``): a machine that tests both lines
    keeps one archive for each (see :func:`build`)."""
    key = archive_key(extra_class_path, jars)
    if key is None:
        return None
    import pyspark  # archive_key found it

    line = ".".join(pyspark.__version__.split(".")[:2])
    return cache_dir / ARCHIVE_FOLDER / f"driver-{line}-{key}.jsa"


def _line_of(archive: Path) -> str | None:
    """The Spark line an archive's name gives (``driver-4.1-<key>.jsa``), or None for a name without one."""
    parts = archive.name.split("-")
    return parts[1] if len(parts) == 3 else None


def conflicting_option(java_options: str = "") -> str | None:
    """The first option, in ``java_options`` or the variables the JVM reads, that rules the archive out."""
    texts = [java_options, *(os.environ.get(name, "") for name in JAVA_OPTION_VARIABLES)]
    return next((option for option in CONFLICTING_OPTIONS for text in texts if option in text), None)


def driver_options(cache_dir: Path, extra_class_path: str = "", java_options: str = "", jars: str = "") -> str:
    """Java options for a driver JVM this process starts: map the archive in, or write it (when building).

    Args:
        cache_dir: The jar cache folder (``settings.path("jar_cache_dir")``).
        extra_class_path: ``spark.driver.extraClassPath`` of the session.
        java_options: The session's ``spark.driver.extraJavaOptions`` (see CONFLICTING_OPTIONS).
        jars: ``spark.jars`` of the session.

    Returns:
        Options for ``spark.driver.extraJavaOptions``, or "" when there is no archive to use.
    """
    target = os.environ.get(BUILD_TARGET_VARIABLE)
    if target:
        return f"-XX:ArchiveClassesAtExit={target} {QUIET}"
    if conflicting_option(java_options) is not None:
        return ""
    path = archive_path(cache_dir, extra_class_path, jars)
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {QUIET}"


def build(
    cache_dir: Path, extra_class_path: str = "", python: str = sys.executable, jars: str = ""
) -> tuple[Path | None, float]:
    """Build the archive when it is missing: one session of typical work, in a child process.

    Args:
        cache_dir: The jar cache folder.
        extra_class_path: ``spark.driver.extraClassPath`` of the sessions that will use it.
        jars: ``spark.jars`` of the sessions that will use it.
        python: The interpreter to run the child with.

    Returns:
        The archive (None when Java or Spark cannot be found, or the child failed) and the seconds
        the build took (0.0 when the archive was already there).
    """
    path = archive_path(cache_dir, extra_class_path, jars)
    if path is None:
        return None, 0.0
    if path.is_file():
        return path, 0.0
    began = time.monotonic()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="icestream-cds-") as scratch:
        env = {
            **os.environ,
            BUILD_TARGET_VARIABLE: str(partial),
            "ICESTREAM_WAREHOUSE": str(Path(scratch) / "warehouse"),
            "ICESTREAM_RUN_DIR": str(Path(scratch) / "run"),
            "ICESTREAM_OUTPUT_DIR": str(Path(scratch) / "output"),
            "ICESTREAM_SPARK_MASTER": "local[2]",
            "ICESTREAM_PROFILE": "local",
            "ICESTREAM_SPARK_LOG_LEVEL": "ERROR",
        }
        result = subprocess.run(
            [python, "-m", "icestream.runtime.cds_workload"],
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
    if result.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        return None, time.monotonic() - began
    # This line's archives of an earlier Java, Spark or jar go (and any named before names carried their line);
    # the other line's stays: .ci/run builds one for each line, one after the other.
    for older in path.parent.glob("driver-*.jsa"):
        if _line_of(older) in (_line_of(path), None):
            older.unlink(missing_ok=True)
    partial.replace(path)
    return path, time.monotonic() - began


def session_jars(settings: Settings) -> tuple[str, str]:
    """``spark.driver.extraClassPath`` and ``spark.jars`` of a session :func:`get_spark` starts with these settings.

    Raises:
        JarError: If the Iceberg jars cannot be provisioned.
    """
    from icestream.runtime.jars import resolve_jars
    from icestream.runtime.localfs import local_fs_conf

    extra = local_fs_conf(settings).get("spark.driver.extraClassPath", "")
    return extra, resolve_jars(settings).spark_conf().get("spark.jars", "")


def main() -> None:
    """``python -m icestream.runtime.cds``: build the archive for the default settings (``make setup``)."""
    from icestream.config import load_settings

    settings = load_settings()
    extra, jars = session_jars(settings)
    path, seconds = build(settings.path("jar_cache_dir"), extra, jars=jars)
    if path is None:
        print(">> class data sharing archive: not built (sessions start without it; see docs/performance.md)")
    elif seconds:
        print(f">> class data sharing archive: built in {seconds:.0f} s ({path.stat().st_size // 2**20} MiB)")
    else:
        print(">> class data sharing archive: ready")


if __name__ == "__main__":
    main()
