"""Provision the Apache Iceberg Spark runtime: the one place that knows where jars come from.

Resolution order (``resolve_jars``):

1. explicit paths from configuration (``ICESTREAM_ICEBERG_JARS``);
2. jars already built in the cache folder (``ICESTREAM_JAR_CACHE_DIR``, default ``.cache/jars``);
3. a build from the pinned PyPI wheel ``snowpark-connect-deps-iceberg``, whose Iceberg runtime jar
   lacks the relocated Jackson classes it references: we relocate the Jackson jars that pyspark
   bundles into Iceberg's shaded package with jarjar (see docs/stack.md) and cache the result;
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

import dataclasses
import glob
import importlib.util
import os
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from icestream.config import SPARK_SCALA, Settings
from icestream.errors import JarError

WHEEL_DISTRIBUTION = "snowpark-connect-deps-iceberg==1.0.3"
WHEEL_PACKAGE = "snowpark_connect_deps_iceberg"
JACKSON_VERSION = "2.15.2"
JACKSON_JARS = ("jackson-annotations", "jackson-core", "jackson-databind", "jackson-datatype-jsr310")
JARJAR_CANDIDATES = ("/usr/share/java/jarjar.jar",)
RELOCATION_RULE = "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1\n"

# Entries whose presence proves a jar is what it claims to be.
RUNTIME_MARKERS = (
    "org/apache/iceberg/spark/SparkCatalog.class",
    "org/apache/iceberg/spark/extensions/IcebergSparkSessionExtensions.class",
)
JACKSON_MARKERS = ("org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class",)
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


def jackson_jar_name() -> str:
    """File name of the relocated Jackson jar this module builds."""
    return f"iceberg-shaded-jackson-{JACKSON_VERSION}.jar"


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


def _missing_entries(path: Path, markers: tuple[str, ...]) -> list[str]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile) as error:
        raise JarError(
            f"{path} is not a readable jar ({error}). Delete it and run `icestream doctor` "
            "(or `make run`) to provision the jars again."
        ) from None
    return [marker for marker in markers if marker not in names]


def check_jars(jars: tuple[Path, ...]) -> None:
    """Check that the jars exist and together hold the Iceberg runtime and relocated Jackson.

    Args:
        jars: The jar files that will go on ``spark.jars``.

    Raises:
        JarError: Naming the missing file or class and how to fix it.
    """
    for path in jars:
        if not path.is_file():
            raise JarError(f"Iceberg jar not found: {path}. Fix the path in ICESTREAM_ICEBERG_JARS or unset it.")
    for markers, what in ((RUNTIME_MARKERS, "the Iceberg Spark runtime"), (JACKSON_MARKERS, "relocated Jackson")):
        if not any(not _missing_entries(path, markers) for path in jars):
            raise JarError(
                f"The jars {', '.join(path.name for path in jars)} do not contain {what} "
                f"(looked for {markers[0]}). Add the missing jar to ICESTREAM_ICEBERG_JARS, or unset it "
                "to let icestream build the jars from the pinned wheel."
            )


def _cached(settings: Settings) -> tuple[Path, ...] | None:
    cache = settings.path("jar_cache_dir")
    wanted = (cache / runtime_jar_name(settings.iceberg_version), cache / jackson_jar_name())
    return wanted if all(path.is_file() for path in wanted) else None


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
            f"{runtime_jar_name('1.10.x')} and a relocated Jackson jar, or set ICESTREAM_JAR_SOURCE=maven "
            "on a machine that reaches Maven Central."
        )
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def find_jarjar() -> Path:
    """Locate the jarjar relocation tool (Debian package ``libjarjar-java``).

    Raises:
        JarError: If it is not installed.
    """
    for candidate in (os.environ.get("ICESTREAM_JARJAR", ""), *JARJAR_CANDIDATES):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise JarError(
        "The jar relocation tool jarjar is missing; it is needed once to build the Jackson classes "
        "the Iceberg runtime lacks. Install it with `sudo apt-get install libjarjar-java` "
        "(or set ICESTREAM_JARJAR to a jarjar.jar)."
    )


def pyspark_jar_folder() -> Path:
    """pyspark's ``jars`` folder (Spark's own jars: Jackson, Hadoop, Janino, py4j)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise JarError("pyspark is not installed. Run `make run` or `pip install -e '.[workbook]'`.")
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def _merge_jackson(target: Path) -> None:
    """Merge pyspark's Jackson jars into one input jar for jarjar.

    module-info.class and META-INF/versions/** are left out: jarjar cannot relocate them and the
    relocated copy must not claim the original module name. META-INF/services is left out too, so
    the merged jar never registers providers under the original, unshaded names.
    """
    folder = pyspark_jar_folder()
    seen: set[str] = set()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as merged:
        for name in JACKSON_JARS:
            source = folder / f"{name}-{JACKSON_VERSION}.jar"
            if not source.is_file():
                raise JarError(f"{source} is missing from pyspark; reinstall it with `make clean run`.")
            with zipfile.ZipFile(source) as archive:
                for entry in archive.namelist():
                    skipped = (
                        entry.endswith("/")
                        or entry.endswith("module-info.class")
                        or entry.startswith(("META-INF/versions/", "META-INF/services/", "META-INF/maven/"))
                        or entry in seen
                    )
                    if not skipped:
                        seen.add(entry)
                        merged.writestr(entry, archive.read(entry))


def build_jars(settings: Settings) -> tuple[Path, ...]:
    """Build the runtime + relocated Jackson pair into the cache folder from the pinned wheel.

    Args:
        settings: Supplies the cache folder and Iceberg version.

    Returns:
        The two cached jar paths.

    Raises:
        JarError: If the wheel, pyspark or jarjar is missing, or the build fails.
    """
    runtime_source = wheel_jar_folder() / runtime_jar_name(settings.iceberg_version)
    if not runtime_source.is_file():
        raise JarError(
            f"{runtime_source.name} is not in the installed wheel. Pin {WHEEL_DISTRIBUTION} or set "
            "ICESTREAM_ICEBERG_VERSION to the version it ships."
        )
    jarjar = find_jarjar()
    cache = settings.path("jar_cache_dir")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        work = Path(scratch)
        _merge_jackson(work / "jackson-merged.jar")
        (work / "rules.txt").write_text(RELOCATION_RULE)
        java = shutil.which("java") or "java"
        result = subprocess.run(
            [
                java,
                "-jar",
                str(jarjar),
                "process",
                str(work / "rules.txt"),
                str(work / "jackson-merged.jar"),
                str(work / "out.jar"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0 or not (work / "out.jar").is_file():
            raise JarError(f"Relocating Jackson with jarjar failed: {result.stderr.strip()[-500:]}")
        if _missing_entries(work / "out.jar", JACKSON_MARKERS):
            raise JarError("The relocated Jackson jar lacks JsonFactoryBuilder; jarjar did not apply the rule.")
        # Copy, then rename into place, so a crash never leaves a half-written jar in the cache.
        shutil.copyfile(runtime_source, work / "runtime.jar")
        os.replace(work / "runtime.jar", cache / runtime_jar_name(settings.iceberg_version))
        os.replace(work / "out.jar", cache / jackson_jar_name())
    return (cache / runtime_jar_name(settings.iceberg_version), cache / jackson_jar_name())


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


def resolve_jars(settings: Settings, build: bool = True) -> JarPlan:
    """Decide which jars Spark loads, building them when needed and allowed.

    With the JDBC catalog the plan also holds the SQLite JDBC driver (see :func:`sqlite_jdbc_driver`).

    Args:
        settings: The active settings.
        build: Build from the wheel when nothing is cached (False: only report).

    Returns:
        The plan to hand to the Spark session builder.

    Raises:
        JarError: If no source yields a complete, readable set of jars, or the catalog's driver is missing.
    """
    return _with_catalog_driver(iceberg_plan(settings, build), settings)


def iceberg_plan(settings: Settings, build: bool = True) -> JarPlan:
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
        check_jars(cached)
        return JarPlan("cache", jars=cached)
    if not build:
        raise JarError("The Iceberg jars are not built yet. Run `icestream doctor` or `make run` to build them.")
    jars = build_jars(settings)
    check_jars(jars)
    return JarPlan("built from wheel", jars=jars, notes=(f"built into {jars[0].parent}",))
