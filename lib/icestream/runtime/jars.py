"""Provision the Apache Iceberg Spark runtime: the one place that knows where jars come from.

Resolution order (``resolve_jars``):

1. explicit paths from configuration (``ICESTREAM_ICEBERG_JARS``);
2. the runtime jar already copied into the cache folder (``ICESTREAM_JAR_CACHE_DIR``, default
   ``.cache/jars``), when it holds every class in ``RUNTIME_CLASSES``;
3. a copy of the runtime jar from the pinned PyPI wheel ``snowpark-connect-deps-iceberg`` into that
   folder (a path in the project that ``spark-submit --jars`` lines can name; docs/cluster.md). The
   pinned release's jar is complete: shaded Jackson and HttpClient 5 included (docs/stack.md);
4. Maven coordinates through ``spark.jars.packages`` when configuration asks for them
   (``ICESTREAM_JAR_SOURCE=maven``: machines with internet, EMR, Glue; the ``aws`` profile);
5. nothing, when the platform provides Iceberg itself (``ICESTREAM_JAR_SOURCE=provided``: EMR with
   Iceberg enabled, Glue with ``--datalake-formats iceberg``); the session checks that it loads.

The JDBC catalog (the ``local`` default) also needs the SQLite JDBC driver on the driver's
classpath: ``ICESTREAM_SQLITE_JDBC_JAR``, by default Debian's ``/usr/share/java/sqlite-jdbc.jar``.
Debian's jar carries no native library (``libxerial-sqlite-jdbc-jni`` installs it in
``/usr/lib/<arch>/jni``), so the plan names that folder for ``-Djava.library.path``; an upstream
``org.xerial:sqlite-jdbc`` jar bundles its natives and needs no folder.

Every failure raises :class:`~icestream.errors.JarError` naming what is missing and how to fix it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import importlib.util
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from icestream.config import SPARK_SCALA, Settings
from icestream.errors import JarError

WHEEL_DISTRIBUTION = "snowpark-connect-deps-iceberg==1.0.2"
WHEEL_PACKAGE = "snowpark_connect_deps_iceberg"

# A class from each part of the runtime jar the project uses, and who uses it. Release 1.0.3 of the
# wheel shipped the same Iceberg 1.10.2 runtime stripped of its shaded Jackson and HttpClient 5: its
# first CREATE TABLE failed with ClassNotFoundException ...JsonFactoryBuilder.
RUNTIME_CLASSES = {
    "org/apache/iceberg/spark/SparkCatalog.class": "the catalog",
    "org/apache/iceberg/spark/extensions/IcebergSparkSessionExtensions.class": "the SQL extensions (CALL, branches)",
    "org/apache/iceberg/spark/source/SparkWrite$StreamingAppend.class": "the Structured Streaming sink",
    "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class": "table metadata (shaded Jackson)",
    "org/apache/iceberg/shaded/org/apache/hc/client5/http/impl/classic/HttpClients.class": (
        "the REST catalog client (shaded HttpClient 5)"
    ),
}
CLASSES_TO_LOAD = (
    "org.apache.iceberg.spark.SparkCatalog",
    "org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactoryBuilder",
)
SQLITE_JDBC_DEBIAN = "libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni"
SQLITE_DRIVER_MARKER = "org/sqlite/JDBC.class"
SQLITE_BUNDLED_NATIVES = "org/sqlite/native/"  # upstream jars only; Debian strips them
SQLITE_NATIVE_LIBRARY = "libsqlitejdbc.so"
SQLITE_NATIVE_FOLDERS = ("/usr/lib/*/jni", "/usr/lib/jni")  # Debian multiarch, then the generic folder


def runtime_jar_name(version: str) -> str:
    """File name of the Iceberg Spark runtime jar for Spark 3.5 / Scala 2.12."""
    return f"iceberg-spark-runtime-{SPARK_SCALA}-{version}.jar"


@dataclass(frozen=True)
class JarPlan:
    """What Spark needs: local jar files (``spark.jars``) or Maven coordinates (``spark.jars.packages``)."""

    source: str
    jars: tuple[Path, ...] = ()
    packages: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    library_path: tuple[str, ...] = ()  # folders for -Djava.library.path (the SQLite driver's natives)

    def spark_conf(self) -> dict[str, str]:
        """The Spark configuration entries for this plan."""
        conf = {}
        if self.jars:
            conf["spark.jars"] = ",".join(str(path) for path in self.jars)
        if self.packages:
            conf["spark.jars.packages"] = ",".join(self.packages)
        return conf


def maven_packages(settings: Settings) -> tuple[str, ...]:
    """Maven coordinates of the runtime, plus the AWS bundle (Glue, S3FileIO) for the Glue catalog."""
    packages = [f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_SCALA}:{settings.iceberg_version}"]
    if settings.catalog_type == "glue":
        packages.append(f"org.apache.iceberg:iceberg-aws-bundle:{settings.iceberg_version}")
    return tuple(packages)


def missing_classes(*paths: Path) -> list[str]:
    """The entries of ``RUNTIME_CLASSES`` that none of the jars holds (Spark loads from all of them).

    Raises:
        JarError: If a file is not a readable jar.
    """
    names: set[str] = set()
    for path in paths:
        try:
            with zipfile.ZipFile(path) as archive:
                names.update(archive.namelist())
        except (OSError, zipfile.BadZipFile) as error:
            raise JarError(
                f"{path} is not a readable jar ({error}). Delete it and run `icestream doctor` "
                "(or `make run`) to provision the jars again."
            ) from None
    return [entry for entry in RUNTIME_CLASSES if entry not in names]


def check_jars(jars: tuple[Path, ...]) -> None:
    """Check that the jars exist and together hold a complete Iceberg runtime (``RUNTIME_CLASSES``).

    Args:
        jars: The jar files that will go on ``spark.jars``.

    Raises:
        JarError: Naming the missing file or class and how to fix it.
    """
    for path in jars:
        if not path.is_file():
            raise JarError(f"Iceberg jar not found: {path}. Fix the path in ICESTREAM_ICEBERG_JARS or unset it.")
    missing = missing_classes(*jars)
    if missing:
        needs = ", ".join(f"{RUNTIME_CLASSES[entry]} ({entry})" for entry in missing)
        raise JarError(
            f"The jars {', '.join(path.name for path in jars)} hold no complete Iceberg Spark runtime: "
            f"missing the classes of {needs}. Point ICESTREAM_ICEBERG_JARS at a complete "
            f"{runtime_jar_name('1.10.x')}, or unset it to use the one in {WHEEL_DISTRIBUTION}."
        )


def checked_marker(jar: Path) -> Path:
    """The file beside a cached jar that says which jar was found complete (:func:`jar_stamp`)."""
    return jar.with_name(jar.name + ".complete")


def jar_stamp(jar: Path) -> str:
    """What a completeness check of ``jar`` depends on: the file's size and time, and the classes asked for."""
    status = jar.stat()
    wanted = hashlib.sha256("\n".join(sorted(RUNTIME_CLASSES)).encode()).hexdigest()[:16]
    return f"{status.st_size} {status.st_mtime_ns} {wanted}"


def _cached(settings: Settings) -> tuple[Path, ...] | None:
    """The cached runtime jar, unless it is missing or incomplete (a copy from an older, stripped wheel).

    Reading the 47 MB jar's table of contents to check it took 0.17 CPU-seconds of every process that
    started a session (py-spy, 2026-11-27): a jar found complete is marked (:func:`checked_marker`),
    and checked again only when it, or the classes asked for, change.
    """
    cached = settings.path("jar_cache_dir") / runtime_jar_name(settings.iceberg_version)
    if not cached.is_file():
        return None
    marker, stamp = checked_marker(cached), jar_stamp(cached)
    with contextlib.suppress(OSError):
        if marker.read_text() == stamp:
            return (cached,)
    try:
        if missing_classes(cached):
            return None
    except JarError:  # unreadable: copied anew from the wheel
        return None
    with contextlib.suppress(OSError):  # a read-only cache: checked by every process, as before
        scratch = marker.with_name(f"{marker.name}.{os.getpid()}")
        scratch.write_text(stamp)
        scratch.replace(marker)
    return (cached,)


def wheel_jar_folder() -> Path:
    """The folder of jars inside the installed ``snowpark-connect-deps-iceberg`` wheel.

    Raises:
        JarError: If the wheel is not installed.
    """
    spec = importlib.util.find_spec(WHEEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise JarError(
            f"The Iceberg runtime jars are not installed. Run `make run` (or "
            f"`pip install {WHEEL_DISTRIBUTION}`), or point ICESTREAM_ICEBERG_JARS at "
            f"{runtime_jar_name('1.10.x')}, or set ICESTREAM_JAR_SOURCE=maven "
            "on a machine that reaches Maven Central."
        )
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def pyspark_jar_folder() -> Path:
    """pyspark's ``jars`` folder (Spark's own jars: Jackson, Hadoop, Janino, py4j)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise JarError("pyspark is not installed. Run `make run` or `pip install -e '.[workbook]'`.")
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def copy_runtime_jar(settings: Settings) -> tuple[Path, ...]:
    """Copy the runtime jar from the pinned wheel into the cache folder.

    Args:
        settings: Supplies the cache folder and Iceberg version.

    Returns:
        The cached runtime jar, as a one-element tuple (the plan's ``jars``).

    Raises:
        JarError: If the wheel is missing or does not ship the runtime for ``settings.iceberg_version``.
    """
    name = runtime_jar_name(settings.iceberg_version)
    runtime_source = wheel_jar_folder() / name
    if not runtime_source.is_file():
        raise JarError(
            f"{name} is not in the installed wheel. Pin {WHEEL_DISTRIBUTION} or set "
            "ICESTREAM_ICEBERG_VERSION to the version it ships."
        )
    missing = missing_classes(runtime_source)
    if missing:
        raise JarError(
            f"The installed wheel's {name} is incomplete (no {missing[0]}): install "
            f"{WHEEL_DISTRIBUTION}, whose jar is complete (`make setup` does)."
        )
    cache = settings.path("jar_cache_dir")
    cache.mkdir(parents=True, exist_ok=True)
    # Copy, then rename into place, so a crash never leaves a half-written jar in the cache.
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        partial = Path(scratch) / name
        shutil.copyfile(runtime_source, partial)
        os.replace(partial, cache / name)
    return (cache / name,)


def _sqlite_jdbc_missing(what: str) -> JarError:
    return JarError(
        f"The JDBC catalog (ICESTREAM_CATALOG_TYPE=jdbc, the local default) needs the SQLite JDBC driver: {what}. "
        f"Install Debian's {SQLITE_JDBC_DEBIAN} (`sudo apt-get install {SQLITE_JDBC_DEBIAN}`; `make setup` does "
        "it), or set ICESTREAM_SQLITE_JDBC_JAR to an org.xerial sqlite-jdbc jar from Maven Central (it bundles its "
        "native library), or use ICESTREAM_CATALOG_TYPE=hadoop (safe for one writing process only)."
    )


def sqlite_jdbc_driver(settings: Settings) -> tuple[Path, tuple[str, ...]]:
    """Locate the SQLite JDBC driver for the JDBC catalog, and the folder of its native library.

    Args:
        settings: Supplies ``sqlite_jdbc_jar``.

    Returns:
        The jar, and the folders to put on ``java.library.path`` (empty when the jar bundles its natives).

    Raises:
        JarError: If the jar is missing or is not the driver, or Debian's native library is not installed.
    """
    jar = settings.path("sqlite_jdbc_jar")
    if not jar.is_file():
        raise _sqlite_jdbc_missing(f"{jar} not found")
    try:
        with zipfile.ZipFile(jar) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile) as error:
        raise _sqlite_jdbc_missing(f"{jar} is not a readable jar ({error})") from None
    if SQLITE_DRIVER_MARKER not in names:
        raise _sqlite_jdbc_missing(f"{jar} has no {SQLITE_DRIVER_MARKER}")
    if any(name.startswith(SQLITE_BUNDLED_NATIVES) for name in names):
        return jar, ()
    for pattern in SQLITE_NATIVE_FOLDERS:
        found = sorted(glob.glob(f"{pattern}/{SQLITE_NATIVE_LIBRARY}"))
        if found:
            return jar, (str(Path(found[0]).parent),)
    raise _sqlite_jdbc_missing(f"{jar} has no native library and {SQLITE_NATIVE_LIBRARY} is not installed")


def _with_catalog_driver(plan: JarPlan, settings: Settings) -> JarPlan:
    """Add the JDBC catalog's driver to a plan (other catalogs need nothing more)."""
    if settings.catalog_type != "jdbc":
        return plan
    jar, library_path = sqlite_jdbc_driver(settings)
    return dataclasses.replace(plan, jars=(*plan.jars, jar), library_path=library_path)


def resolve_jars(settings: Settings, copy: bool = True) -> JarPlan:
    """Decide which jars Spark loads, copying the runtime jar into the cache when needed and allowed.

    With the JDBC catalog the plan also holds the SQLite JDBC driver (see :func:`sqlite_jdbc_driver`).

    Args:
        settings: The active settings.
        copy: Copy the jar from the wheel when the cache has none or an incomplete one (False: only report).

    Returns:
        The plan to hand to the Spark session builder.

    Raises:
        JarError: If no source yields a complete, readable set of jars, or the catalog's driver is missing.
    """
    return _with_catalog_driver(iceberg_plan(settings, copy), settings)


def iceberg_plan(settings: Settings, copy: bool = True) -> JarPlan:
    """The Iceberg runtime part of :func:`resolve_jars` (no catalog driver), in the order of the module docstring.

    Raises:
        JarError: If no source yields a complete, readable set of jars.
    """
    if settings.iceberg_jars:
        jars = tuple(Path(item).expanduser().resolve() for item in settings.iceberg_jars)
        check_jars(jars)
        return JarPlan("configured path", jars=jars)
    if settings.jar_source == "maven":
        return JarPlan("maven", packages=maven_packages(settings))
    if settings.jar_source == "provided":
        # EMR and Glue (--datalake-formats iceberg) put their own Iceberg on the classpath; the
        # session checks at start-up that its classes load (spark._verify_classes).
        return JarPlan("provided", notes=("the platform's own Iceberg, checked when the session starts",))
    cached = _cached(settings)
    if cached is not None:
        return JarPlan("cache", jars=cached)
    if not copy:
        raise JarError("The Iceberg jar is not in the cache yet. Run `icestream doctor` or `make run` to copy it.")
    jars = copy_runtime_jar(settings)  # checked complete before the copy
    return JarPlan("copied from wheel", jars=jars, notes=(f"copied into {jars[0].parent}",))
