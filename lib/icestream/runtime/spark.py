"""The Spark session factory: one configured session per process, on any master.

``get_spark`` returns the active session when there is one (so notebooks, tests and the ingest
share a single JVM) and otherwise takes two steps: ``prepare_runtime`` (jars, class archive, catalog,
bucket, shipping: all outside the JVM) and ``start_session`` (the Iceberg SQL extensions, a catalog
named after ``settings.catalog``). Problems a user can cause -- no Java, the wrong Java, missing
jars -- are found while preparing, before the JVM starts, and raised as the project's own errors.

On a cluster it fits in rather than takes over: a session someone else started gets the catalog
added, a driver under ``spark-submit`` keeps its master, jars and Java options
(:mod:`icestream.runtime.cluster`), and a session it starts on a non-local master ships what the
executors need (:mod:`icestream.runtime.shipping`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from icestream.config import Settings, load_settings
from icestream.errors import JarError, JavaError, SparkStartError
from icestream.runtime import aws, cds
from icestream.runtime.catalog import ensure_jdbc_catalog
from icestream.runtime.cluster import existing_conf, merged, with_master
from icestream.runtime.console import filtered_stderr, quiet_query_context_loggers
from icestream.runtime.gateway import children, end_unstarted_gateway
from icestream.runtime.handles import jvm as jvm_of
from icestream.runtime.jars import CLASSES_TO_LOAD, JarPlan, resolve_jars
from icestream.runtime.java_options import append_java_options, drain_options, launcher_environ
from icestream.runtime.literals import install as install_exact_literals
from icestream.runtime.localfs import local_fs_conf
from icestream.runtime.shipping import ShipPlan, ship_plan
from icestream.stack import default_line_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The Javas each Spark line runs on, as Spark documents them (Spark 4: 17 and 21; 3.5: 8, 11 and 17); 17 is
# the one installed and tested here. Java 24 and later start neither: Hadoop's UserGroupInformation calls
# Subject.getSubject, which they refuse (docs/stack.md). A line with no entry takes the default line's.
SUPPORTED_JAVA = {"4.1": (17, 21), "3.5": (17, 11, 8)}
SQLITE_BUSY_TIMEOUT_MS = 30_000
_DEFAULTS_LINE = re.compile(
    r"(?P<key>[^\s=:]+)\s*[=:\s]\s*(?P<value>.*)"
)  # Spark 3.5 runs on 8/11/17; 17 is the pinned, tested version.
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
FAIR_POOLS = Path(__file__).with_name("fairscheduler.xml")  # the ingest's scheduler pools
# The driver's log file in the run folder: Spark's warnings and errors with their whole Java traces (the
# terminal gets one line per warning; a failure icestream reports itself only its error: line).
SPARK_LOG_NAME = "spark.log"
LOG_FILE_PROPERTY = "icestream.spark.log"  # read by log4j2.properties; unset, the file appender writes to /dev/null


def java_version() -> tuple[int, str]:
    """Return the major version of the Java that Spark will start, and its path.

    Raises:
        JavaError: If no Java is found or its version cannot be read.
    """
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise JavaError(
            "Java is not installed (Spark needs Java 17). Install it with "
            "`sudo apt-get install openjdk-17-jre-headless`, or set JAVA_HOME to a Java 17."
        )
    result = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if not match:
        raise JavaError(f"Could not read the version of {java}; Spark needs Java 17.")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0" style
        major = int(match.group(2))
    return major, java


def check_java() -> str:
    """Check that the Java Spark will start is one the installed Spark line runs on (see SUPPORTED_JAVA).

    Returns:
        A one-line description, such as ``Java 17 at /usr/bin/java``.

    Raises:
        JavaError: If Java is missing or has a version the Spark line does not run on.
    """
    major, java = java_version()
    line = default_line_name()
    supported = SUPPORTED_JAVA.get(line, SUPPORTED_JAVA["4.1"])
    if major not in supported:
        why = " (Hadoop's login calls Subject.getSubject, which Java 24 and later refuse)" if major >= 24 else ""
        raise JavaError(
            f"{java} is Java {major}; Spark {line} with this project needs Java 17{why}. Install "
            "openjdk-17-jre-headless and set JAVA_HOME to it (e.g. /usr/lib/jvm/java-17-openjdk-amd64)."
        )
    return f"Java {major} at {java}"


def catalog_conf(settings: Settings) -> dict[str, str]:
    """Spark configuration for the Iceberg catalog of the active profile.

    Args:
        settings: The active settings.

    Returns:
        ``spark.sql.catalog.<name>.*`` entries.
    """
    prefix = f"spark.sql.catalog.{settings.catalog}"
    conf = {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.warehouse": settings.warehouse_uri}
    if settings.catalog_type == "glue":
        conf[f"{prefix}.catalog-impl"] = "org.apache.iceberg.aws.glue.GlueCatalog"
        conf[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
        # Endpoints, cross-account catalog, SSE-KMS, assume-role: see icestream.runtime.aws.
        conf.update({f"{prefix}.{key}": value for key, value in aws.iceberg_properties(settings).items()})
    elif settings.catalog_type == "jdbc":
        # Commits are a compare-and-set of the table's row in SQLite: safe for several processes.
        conf[f"{prefix}.type"] = "jdbc"
        conf[f"{prefix}.uri"] = f"jdbc:sqlite:{settings.catalog_file}"
        conf[f"{prefix}.jdbc.schema-version"] = "V1"  # the schema pyiceberg's SqlCatalog also reads
        conf[f"{prefix}.jdbc.init-catalog-tables"] = "false"  # get_spark creates them: see ensure_jdbc_catalog
        # SQLite locks the file for each write; wait for another process's commit instead of failing.
        conf[f"{prefix}.jdbc.busy_timeout"] = str(SQLITE_BUSY_TIMEOUT_MS)
        # A file:// URI, so table locations never resolve against a cluster's default file system.
        conf[f"{prefix}.warehouse"] = Path(settings.warehouse_uri).as_uri()
    else:
        conf[f"{prefix}.type"] = "hadoop"
    return conf


def spark_defaults() -> dict[str, str]:
    """The cluster's ``spark-defaults.conf`` (``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``), if any.

    Returns:
        Its properties (``key value`` or ``key=value`` lines); empty when there is no such file.
    """
    folder = os.environ.get("SPARK_CONF_DIR") or (
        str(Path(os.environ["SPARK_HOME"]) / "conf") if os.environ.get("SPARK_HOME") else ""
    )
    path = Path(folder) / "spark-defaults.conf" if folder else None
    if path is None or not path.is_file():
        return {}
    properties = {}
    for line in path.read_text().splitlines():
        match = _DEFAULTS_LINE.fullmatch(line.strip())
        if match and not match["key"].startswith(("#", "!")):
            properties[match["key"]] = match["value"].strip()
    return properties


def spark_log_file(settings: Settings) -> Path:
    """The driver's log file: Spark's warnings and errors with their Java traces (``run_dir/spark.log``)."""
    return settings.path("run_dir") / SPARK_LOG_NAME


def java_options(plan: JarPlan, log_file: Path | None = None) -> dict[str, str]:
    """``spark.{driver,executor}.extraJavaOptions``: ours appended to the cluster's defaults.

    Args:
        plan: The jar plan, whose ``library_path`` holds the SQLite driver's native folder.
        log_file: Where the driver logs Spark's warnings and errors whole (None: nowhere but the terminal).

    Returns:
        The two configuration entries (the executor one only when there is something to add).
    """
    defaults = spark_defaults()
    library = {"java.library.path": os.pathsep.join(plan.library_path)} if plan.library_path else {}
    logs = {LOG_FILE_PROPERTY: str(log_file)} if log_file is not None else {}
    driver = {"log4j2.configurationFile": LOG4J_CONFIG.as_uri(), **logs, **library}
    conf = {
        "spark.driver.extraJavaOptions": append_java_options(defaults.get("spark.driver.extraJavaOptions", ""), driver)
    }
    if library:
        # The catalog is opened on the driver only, but spark.jars ships the driver jar to executors
        # (other JVMs on a cluster): one that opens a SQLite connection must find the natives too.
        conf["spark.executor.extraJavaOptions"] = append_java_options(
            defaults.get("spark.executor.extraJavaOptions", ""), library
        )
    return conf


def session_conf(settings: Settings) -> dict[str, str]:
    """The whole Spark configuration this project sets (jars, extensions, catalog, tuning).

    Args:
        settings: The active settings.

    Returns:
        Configuration keys and values.

    Raises:
        JarError: If the Iceberg jars cannot be provisioned.
    """
    local = settings.spark_master.startswith("local")
    plan = resolve_jars(settings)
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": str(settings.spark_ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        # Arrow makes toPandas()/createDataFrame(pandas) columnar: notebooks show results as pandas.
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # The ingest caches each batch's rows for the seconds it takes to write them; compressing
        # that cache cost about 15 % of the JVM's CPU per batch and saved memory nobody needed.
        # Notebooks that cache large frames for long can turn it back on.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # Concurrent jobs share the cores instead of queueing: the ingest's read-ahead and its
        # writes, and a notebook's queries while an ingest runs (see ingest.source.SCHEDULER_POOLS).
        **({"spark.scheduler.mode": "FAIR", "spark.scheduler.allocation.file": FAIR_POOLS.as_uri()} if local else {}),
        # Spark writes every query's plan as text into the event that starts it, for the UI's SQL
        # tab ("formatted" by default, the dearest form). With no UI nothing reads it, and the
        # simple form cost 0.1-0.3 CPU-seconds less per 200,000-record drain (docs/performance.md).
        **({} if settings.spark_ui else {"spark.sql.ui.explainMode": "simple"}),
        # Plans of wide tables (metadata tables have many columns) print whole, without a WARN line.
        "spark.sql.debug.maxToStringFields": "1000",
        # A few shuffle partitions suit one machine; a cluster keeps Spark's default.
        **({"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4"} if local else {}),
        # Python workers import pyspark from site-packages, not from Spark's zips (see spark_daemon).
        **({"spark.python.daemon.module": "icestream.runtime.spark_daemon"} if local else {}),
        **plan.spark_conf(),
        **java_options(plan, _log_file(settings)),
        **catalog_conf(settings),
        **aws_executor_conf(settings),
    }
    return conf


def _log_file(settings: Settings) -> Path | None:
    """:func:`spark_log_file`, its folder made; None if it cannot be (the terminal's lines are then all)."""
    log_file = spark_log_file(settings)
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return log_file


def aws_executor_conf(settings: Settings) -> dict[str, str]:
    """``spark.executorEnv.*``: the region, the driver's AWS profile, the emulator's dummy keys.

    Executors on a cluster do not inherit the driver's environment, so an ``AWS_PROFILE`` or a
    region set there would reach the driver's AWS clients only. Nothing is set for a local
    catalog on the local profile, which talks to no AWS service but the Kinesis emulator.
    """
    if settings.catalog_type != "glue" and settings.profile == "local":
        return {}
    return {f"spark.executorEnv.{name}": value for name, value in aws.executor_environ(settings).items()}


def _verify_classes(spark: SparkSession, settings: Settings) -> None:
    """Load the Iceberg classes once, so a broken jar fails here with a clear message."""
    jvm = jvm_of(spark)
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    for name in CLASSES_TO_LOAD:
        try:
            jvm.java.lang.Class.forName(name, False, loader)
        except Exception:  # noqa: BLE001 - py4j raises its own error types for a missing class
            if settings.jar_source == "provided":
                raise JarError(
                    f"ICESTREAM_JAR_SOURCE=provided, but the session cannot load {name}: the platform does not "
                    "provide Iceberg. Enable it (EMR: the iceberg-defaults classification, iceberg.enabled=true; "
                    "Glue: --datalake-formats iceberg; spark-submit: --jars), or set ICESTREAM_JAR_SOURCE=auto."
                ) from None
            raise JarError(
                f"Spark started but cannot load {name}. The Iceberg jars on spark.jars are incomplete: "
                "delete the jar cache folder (.cache/jars) and run `icestream doctor` to copy it again."
            ) from None


def _adopt(session: SparkSession, settings: Settings) -> SparkSession:
    """Use a session someone else started (a notebook platform's, spark-submit's) without restarting it.

    Catalogs are runtime settings, so the catalog is added to the running session; the SQL
    extensions are static and can only be reported when missing (``CALL`` procedures need them).
    """
    for key, value in catalog_conf(settings).items():
        if session.conf.get(key, None) is None:
            session.conf.set(key, value)
    extensions = session.conf.get("spark.sql.extensions", None) or ""
    if "IcebergSparkSessionExtensions" not in extensions:
        logging.getLogger(__name__).warning(
            "The running Spark session has no Iceberg SQL extensions; CALL procedures and branch DDL will fail. "
            "Start it with spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions."
        )
    _verify_classes(session, settings)
    return session


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables while a SparkContext starts (pyspark reads them then), then restore them."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@dataclass(frozen=True)
class PreparedRuntime:
    """What a new session starts with, once :func:`prepare_runtime` has made it ready."""

    settings: Settings  # fitted to the cluster's own master (spark-submit's, the platform's)
    conf: dict[str, str]  # the whole configuration: ours, the class archive and shipping, the cluster's merged in
    environ: dict[str, str]  # variables set while the driver starts (AWS for the JVM, the shipped environment)
    running: bool  # a driver is already up (spark-submit): its master stands
    named: bool  # the cluster's configuration names the application already


def prepare_runtime(settings: Settings, drain: bool = False, creates_namespace: bool = False) -> PreparedRuntime:
    """Make ready what a new session needs outside its JVM: Java checked, the cluster's configuration
    respected, the Iceberg jars found or copied, a local JVM's file system and class archive, the JDBC
    catalog's tables (or an emulator's bucket), the project shipped to a non-local master's executors.

    Args:
        settings: The active settings.
        drain: The process drains a stream and ends: a new driver JVM starts with C1 only.
        creates_namespace: The session creates the namespace (``icestream setup``): a Glue database that is
            not there yet passes the pre-flight check, which refuses it for every other command.

    Raises:
        ConfigError: A Glue catalog's setting is wrong (credentials, role, database, bucket).
        JavaError: If Java is missing or unsupported.
        JarError: If the Iceberg jars cannot be provisioned.
        ShipError: If what a non-local master's executors need cannot be built.
    """
    check_java()
    theirs, running = existing_conf()  # spark-submit's, or the platform's spark-defaults.conf
    settings = with_master(settings, theirs, running)
    conf = session_conf(settings)
    if not running:  # only a JVM this process starts can take the jar on its class path, or map an archive
        conf.update(local_fs_conf(settings))
        if settings.class_data_sharing:
            java_options = " ".join(options.get("spark.driver.extraJavaOptions", "") for options in (conf, theirs))
            archive = cds.driver_options(
                settings.path("jar_cache_dir"),
                conf.get("spark.driver.extraClassPath", ""),
                java_options,
                jars=conf.get("spark.jars", ""),
            )
            if archive:
                driver = f"{conf.get('spark.driver.extraJavaOptions', '')} {archive}".strip()
                conf["spark.driver.extraJavaOptions"] = driver
        if drain:  # a process that drains and ends: C1 only (runtime.java_options)
            driver = conf.get("spark.driver.extraJavaOptions", "")
            conf["spark.driver.extraJavaOptions"] = drain_options(
                driver, [theirs.get("spark.driver.extraJavaOptions", "")]
            )
    if settings.catalog_type == "jdbc":
        ensure_jdbc_catalog(settings)  # Spark starts with jdbc.init-catalog-tables=false (see there)
    elif settings.profile == "localstack":
        aws.ensure_bucket(settings)  # an emulator starts empty; on AWS the deployment makes the bucket
    if settings.catalog_type == "glue":
        aws.check_catalog_access(settings, creates_namespace)  # one error line for a bad setting, not a Java trace
    shipped = ship_plan(settings) if not running else ShipPlan("none")  # spark-submit ships with its own options
    conf.update(shipped.conf)
    if settings.spark_master.startswith("local"):
        # A local driver listens on loopback only, never on the machine's public interface.
        conf.setdefault("spark.driver.host", "127.0.0.1")
        conf.setdefault("spark.driver.bindAddress", "127.0.0.1")
    # The driver JVM starts with the same AWS variables its executors get (see aws_executor_conf).
    driver_environ = aws.executor_environ(settings) if aws_executor_conf(settings) else {}
    environ = {**driver_environ, **shipped.environ, **(launcher_environ() if not running else {})}
    return PreparedRuntime(settings, merged(conf, theirs), environ, running, "spark.app.name" in theirs)


def start_session(runtime: PreparedRuntime, app_name: str = "icestream") -> SparkSession:
    """Start the session :func:`prepare_runtime` made ready (a session already running is used as it is).

    Raises:
        JarError: If the session cannot load the Iceberg classes.
        SparkStartError: If the JVM fails to start.
    """
    from pyspark.sql import SparkSession

    # Before any literal is made: a datetime or date before 1582-10-15 would otherwise move (see literals).
    install_exact_literals()
    quiet_query_context_loggers()
    settings = runtime.settings
    active = _active_session(settings)
    if active is not None:
        return active
    if settings.spark_master.startswith("local"):
        # Executors of a local master must use this interpreter (the project's venv).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder if runtime.running else SparkSession.builder.master(settings.spark_master)
    if not runtime.named:
        builder = builder.appName(app_name)
    for key, value in runtime.conf.items():
        builder = builder.config(key, value)
    before = children()
    try:
        # Spark 4's JVM prints an incubator-module warning at start that no option silences (jvm_stderr).
        import pyspark

        spark_4 = int(pyspark.__version__.split(".")[0]) >= 4
        stderr = filtered_stderr() if spark_4 else contextlib.nullcontext()
        with _environ(runtime.environ), stderr:
            spark = builder.getOrCreate()
    except BaseException as error:  # Ctrl-C too: pyspark leaves the JVM it interrupts running for ever
        end_unstarted_gateway(before)
        if not isinstance(error, Exception):
            raise
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise SparkStartError(
            f"Spark could not start on master {settings.spark_master!r}: {first_line}. "
            "Run `icestream doctor` to check Java, the jars and the settings."
        ) from None
    spark.sparkContext.setLogLevel(settings.spark_log_level.upper())
    _verify_classes(spark, settings)
    return spark


def _active_session(settings: Settings) -> SparkSession | None:
    """The process's running session, given the catalog when it lacks it (:func:`_adopt`); None if there is none."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and active.conf.get(f"spark.sql.catalog.{settings.catalog}", None) is None:
        return _adopt(active, settings)
    return active


def get_spark(
    settings: Settings | None = None, app_name: str = "icestream", drain: bool = False, creates_namespace: bool = True
) -> SparkSession:
    """The process's running session (its catalog added when missing), or :func:`prepare_runtime`
    then :func:`start_session`: what notebooks call; the command line runs the two steps itself.

    Args:
        settings: The active settings (default: ``load_settings()``).
        app_name: The application name shown in the Spark UI and logs.
        drain: The process drains a stream and ends: a new driver JVM starts with C1 only.
        creates_namespace: The session may create the namespace, so a Glue database that is not there yet
            passes the pre-flight check (notebook 00 creates it with the first session); ``False`` refuses it.

    Raises:
        JavaError: If Java is missing or unsupported.
        JarError: If the Iceberg jars are missing or broken (or, with ``jar_source`` provided, absent).
        ShipError: If what a non-local master's executors need cannot be built.
        SparkStartError: If the JVM fails to start for another reason.
    """
    # Before any literal is made: a datetime or date before 1582-10-15 would otherwise move (see literals).
    install_exact_literals()
    settings = settings or load_settings()
    active = _active_session(settings)
    if active is not None:
        return active
    return start_session(prepare_runtime(settings, drain, creates_namespace), app_name)
