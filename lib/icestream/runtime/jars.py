"""Provision the JVM packages a session loads: the one place that knows where jars come from.

The packages are named once, by Maven coordinates, in ``icestream/stack.toml`` (per Spark line).
Resolution order (``resolve_jars``):

1. explicit paths from configuration (``ICESTREAM_ICEBERG_JARS``), checked to hold a complete
   Iceberg runtime (``RUNTIME_CLASSES``);
2. Maven coordinates through ``spark.jars.packages`` when configuration asks for them
   (``ICESTREAM_JAR_SOURCE=maven``: EMR, Glue, a laptop with internet; the ``aws`` profile);
3. nothing, when the platform provides Iceberg itself (``ICESTREAM_JAR_SOURCE=provided``: EMR with
   Iceberg enabled, Glue with ``--datalake-formats iceberg``); the session checks that it loads;
4. otherwise (``auto``, the default) the jars resolved from Maven Central into the cache folder
   (``ICESTREAM_JAR_CACHE_DIR``, default ``.cache/jars``) by :mod:`icestream.runtime.maven`,
   checksums checked; later runs read its manifest and need no network. These are paths in the
   project that ``spark-submit --jars`` lines can name (docs/cluster.md).

The JDBC catalog (the ``local`` default) also needs the SQLite JDBC driver on the driver's
classpath: ``ICESTREAM_SQLITE_JDBC_JAR``, by default Debian's ``/usr/share/java/sqlite-jdbc.jar``.
Debian's jar carries no native library (``libxerial-sqlite-jdbc-jni`` installs it in
``/usr/lib/<arch>/jni``), so the plan names that folder for ``-Djava.library.path``; an upstream
``org.xerial:sqlite-jdbc`` jar bundles its natives and needs no folder.

Every failure raises :class:`~icestream.errors.JarError` naming what is missing and how to fix it.
"""

from __future__ import annotations

import dataclasses
import glob
import importlib.util
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from icestream.config import Settings
from icestream.errors import JarError
from icestream.runtime import maven
from icestream.stack import Package, SparkLine, spark_line

# A class from each part of the runtime jar the project uses, and who uses it: a jar given by path is
# checked for them. A runtime stripped of its shaded Jackson and HttpClient 5 (one Python wheel shipped
# such a copy) failed its first CREATE TABLE with ClassNotFoundException ...JsonFactoryBuilder.
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


def runtime_jar_name(version: str, line: SparkLine | None = None) -> str:
    """File name of the Iceberg Spark runtime jar of a Spark line (the installed pyspark's by default)."""
    runtime = (line or spark_line()).runtime
    return f"{runtime.artifact}-{version}.jar"


def line_packages(settings: Settings, line: SparkLine | None = None) -> tuple[Package, ...]:
    """The line's packages with Iceberg's at ``settings.iceberg_version`` (the pinned one unless set)."""
    line = line or spark_line()
    return tuple(
        dataclasses.replace(package, coordinate=f"{package.group}:{package.artifact}:{settings.iceberg_version}")
        if package.group == "org.apache.iceberg"
        else package
        for package in line.packages
    )


@dataclass(frozen=True)
class JarPlan:
    """What Spark needs: local jar files (``spark.jars``) or Maven coordinates (``spark.jars.packages``)."""

    source: str
    jars: tuple[Path, ...] = ()
    packages: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()  # group:artifact Spark's resolution of ``packages`` leaves out
    notes: tuple[str, ...] = field(default=())
    library_path: tuple[str, ...] = ()  # folders for -Djava.library.path (the SQLite driver's natives)

    def spark_conf(self) -> dict[str, str]:
        """The Spark configuration entries for this plan."""
        conf = {}
        if self.jars:
            conf["spark.jars"] = ",".join(str(path) for path in self.jars)
        if self.packages:
            conf["spark.jars.packages"] = ",".join(self.packages)
        if self.excludes:
            conf["spark.jars.excludes"] = ",".join(self.excludes)
        return conf


def maven_packages(settings: Settings) -> tuple[str, ...]:
    """The coordinates a session with these settings loads, for ``spark.jars.packages`` / ``--packages``."""
    wanted = ("always", settings.catalog_type)
    return tuple(package.coordinate for package in line_packages(settings) if package.when in wanted)


def maven_excludes(settings: Settings) -> tuple[str, ...]:
    """What those packages pull in and must not, for ``spark.jars.excludes`` / ``--exclude-packages``."""
    wanted = ("always", settings.catalog_type)
    return tuple(name for package in line_packages(settings) if package.when in wanted for name in package.exclude)


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
            f"{runtime_jar_name(spark_line().iceberg)}, or unset it to use the one resolved from Maven Central."
        )


def pyspark_jar_folder() -> Path:
    """pyspark's ``jars`` folder (Spark's own jars: Jackson, Hadoop, Janino, py4j)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise JarError("pyspark is not installed. Run `make run` or `pip install -e '.[workbook]'`.")
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def resolved_jars(settings: Settings, resolve: bool = True) -> tuple[Path, ...]:
    """The jars of the line's packages this session loads, resolved from Maven Central once and cached.

    Every package of the line is resolved together (one manifest for every catalog); the session gets
    those its catalog needs (``when`` in ``stack.toml``).

    Args:
        settings: Supplies the cache folder, the catalog and Iceberg's version.
        resolve: Start Maven when the cache has no valid manifest (False: only report).

    Raises:
        JarError: If the jars are not resolved yet and ``resolve`` is False, or Maven fails.
    """
    line = spark_line()
    packages = line_packages(settings, line)
    cache = settings.path("jar_cache_dir")
    own = tuple(sorted(path.name for path in pyspark_jar_folder().glob("*.jar")))
    if resolve:
        jars = maven.resolve(line, packages, cache, own)
    else:
        found = maven.read_manifest(maven.line_folder(cache, line), maven.manifest_key(packages, own))
        if found is None:
            raise JarError(
                "The JVM packages are not resolved yet. Run `make setup` (or `icestream doctor`) to fetch them from "
                "Maven Central once."
            )
        jars = found
    wanted = set(maven_packages(settings))
    return tuple(jar.path for jar in jars if jar.package in wanted)


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
    """Decide which jars Spark loads, resolving them from Maven Central into the cache when needed and allowed.

    With the JDBC catalog the plan also holds the SQLite JDBC driver (see :func:`sqlite_jdbc_driver`).

    Args:
        settings: The active settings.
        copy: Resolve the packages when the cache has no valid manifest (False: only report).

    Returns:
        The plan to hand to the Spark session builder.

    Raises:
        JarError: If no source yields a complete, readable set of jars, or the catalog's driver is missing.
    """
    return _with_catalog_driver(iceberg_plan(settings, copy), settings)


def iceberg_plan(settings: Settings, copy: bool = True) -> JarPlan:
    """The JVM packages part of :func:`resolve_jars` (no catalog driver), in the order of the module docstring.

    Raises:
        JarError: If no source yields a complete, readable set of jars.
    """
    if settings.iceberg_jars:
        jars = tuple(Path(item).expanduser().resolve() for item in settings.iceberg_jars)
        check_jars(jars)
        return JarPlan("configured path", jars=jars)
    if settings.jar_source == "maven":
        return JarPlan("maven", packages=maven_packages(settings), excludes=maven_excludes(settings))
    if settings.jar_source == "provided":
        # EMR and Glue (--datalake-formats iceberg) put their own Iceberg on the classpath; the
        # session checks at start-up that its classes load (spark._verify_classes).
        return JarPlan("provided", notes=("the platform's own Iceberg, checked when the session starts",))
    jars = resolved_jars(settings, resolve=copy)
    return JarPlan("maven central (cached)", jars=jars, notes=(f"in {jars[0].parent}",) if jars else ())
