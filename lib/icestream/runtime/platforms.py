"""The AWS platforms a job may run on, with the Spark, Iceberg and Python each provides.

One row per release (EMR on EC2 and EMR Serverless share release labels and versions). The
versions come from AWS's release notes, named in each row's ``source``; where a number was not
confirmed here against such a page, the source says so. The table drives the version checks:
:func:`platform_warnings` (what ``icestream doctor`` prints) and the Iceberg procedure arguments
:mod:`icestream.lake.maintenance` may use (:func:`at_least`).

A platform is supported when its Spark is one of the lines ``icestream/stack.toml`` pins and the
tests run on (Spark 4.1 by default, 3.5 kept); any other Spark (EMR 8.0's 4.0) is listed and
refused with the reason (:func:`unsupported_spark_reason`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from icestream.runtime.handles import jvm as jvm_of
from icestream.stack import lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The Python the library needs (datetime.UTC and the pins are 3.11's); a platform's own Python may differ.
REQUIRED_PYTHON = "3.11"


def supported_lines() -> tuple[str, ...]:
    """The Spark lines (major.minor) icestream pins and is tested on, newest first."""
    return tuple(sorted(lines(), key=lambda name: version_tuple(name), reverse=True))


def unsupported_spark_reason(spark: str) -> str | None:
    """Why icestream does not run on this Spark, or None when its line is pinned and tested."""
    line = ".".join(str(part) for part in version_tuple(spark)[:2])
    if line in lines():
        return None
    return (
        f"Spark {line} is not one of the lines icestream pins and tests ({', '.join(supported_lines())}, "
        "lib/icestream/stack.toml): use one of those (`make setup`; ICESTREAM_SPARK_LINE selects it)."
    )


_EMR_NOTES = "https://docs.aws.amazon.com/emr/latest/ReleaseGuide/emr-{label}-release.html"
_GLUE_NOTES = "https://docs.aws.amazon.com/glue/latest/dg/release-notes.html"
_UNCONFIRMED = " (Spark version not confirmed here against that page)"


@dataclass(frozen=True)
class Platform:
    """One release of a platform and the versions it provides.

    Attributes:
        service: ``emr-ec2``, ``emr-serverless`` or ``glue``.
        release: The release label (``emr-7.12.0``, ``glue-5.1``).
        spark: Spark's version.
        iceberg: Iceberg's version (the platform's own jars).
        python: The Pythons the image carries, the one icestream needs last if present.
        source: The release notes page the numbers come from, and what was not confirmed.
    """

    service: str
    release: str
    spark: str
    iceberg: str
    python: tuple[str, ...]
    source: str

    @property
    def supported(self) -> bool:
        """Whether icestream runs on it: its Spark is a pinned, tested line (:func:`unsupported_spark_reason`)."""
        return unsupported_spark_reason(self.spark) is None


def _emr(release: str, spark: str, iceberg: str, python: tuple[str, ...], note: str = "") -> list[Platform]:
    label = release.removeprefix("emr-").replace(".", "")
    source = _EMR_NOTES.format(label=label) + note
    return [Platform(service, release, spark, iceberg, python, source) for service in ("emr-ec2", "emr-serverless")]


# EMR 7.1+ images carry Python 3.9 (the default) and 3.11 (AWS release notes).
_EMR7_PYTHON = ("3.9", "3.11")
PLATFORMS: tuple[Platform, ...] = (
    *_emr("emr-7.5.0", "3.5.2", "1.6.1", _EMR7_PYTHON, _UNCONFIRMED),
    *_emr("emr-7.8.0", "3.5.4", "1.7.1", _EMR7_PYTHON, _UNCONFIRMED),
    *_emr("emr-7.10.0", "3.5.5", "1.8.1", _EMR7_PYTHON, _UNCONFIRMED),
    *_emr("emr-7.11.0", "3.5.5", "1.9.1", _EMR7_PYTHON, _UNCONFIRMED),
    *_emr("emr-7.12.0", "3.5.6", "1.10.0", _EMR7_PYTHON, _UNCONFIRMED),
    Platform("glue", "glue-5.0", "3.5.4", "1.7.1", ("3.11",), _GLUE_NOTES),
    Platform("glue", "glue-5.1", "3.5.6", "1.10.0", ("3.11",), _GLUE_NOTES),
    *_emr("emr-8.0.0", "4.0.2", "1.10.1", ("3.11",), " (Python version not confirmed here)"),
    *_emr("emr-8.1.0", "4.1.1", "1.11.0", ("3.11",), " (Python version not confirmed here)"),
)

_NUMBERS = re.compile(r"\d+(?:\.\d+)*")


def version_tuple(version: str) -> tuple[int, ...]:
    """``"1.10.0"`` (or ``"1.10.0-amzn-0"``) → ``(1, 10, 0)``; no number → ``()``."""
    found = _NUMBERS.search(version or "")
    return tuple(int(part) for part in found.group(0).split(".")) if found else ()


def at_least(version: str | None, needed: str) -> bool:
    """Whether ``version`` is ``needed`` or newer; an unknown version (None) counts as new enough."""
    return version is None or version_tuple(version) >= version_tuple(needed)


def find_platform(service: str, release: str) -> Platform:
    """The row of ``release`` on ``service`` (``find_platform("glue", "glue-5.0")``).

    Raises:
        KeyError: If the table has no such row.
    """
    for platform in PLATFORMS:
        if platform.service == service and platform.release == release:
            return platform
    raise KeyError(f"{service} {release}: not in the platform table (icestream.runtime.platforms.PLATFORMS)")


def matching_platforms(spark: str, iceberg: str) -> list[Platform]:
    """The rows whose Spark and Iceberg (major.minor.patch) match a running session's."""
    return [
        platform
        for platform in PLATFORMS
        if version_tuple(platform.spark)[:3] == version_tuple(spark)[:3]
        and version_tuple(platform.iceberg)[:3] == version_tuple(iceberg)[:3]
    ]


def platform_warnings(spark: str, iceberg: str | None, python: str) -> list[str]:
    """What a session with these versions cannot do, one line each (empty: nothing missing).

    Args:
        spark: Spark's version (``spark.version``).
        iceberg: Iceberg's version (:func:`iceberg_version`), None if no Iceberg runtime loaded.
        python: The Python version the job runs (driver or executors).
    """
    warnings = []
    reason = unsupported_spark_reason(spark)
    if reason is not None:
        warnings.append(f"Spark {spark}: {reason}")
    if iceberg is None:
        warnings.append("no Iceberg runtime in the session: add the platform's Iceberg (EMR, Glue) or spark.jars")
    elif version_tuple(spark)[:2] == (4, 1) and not at_least(iceberg, "1.12.0"):
        warnings.append(
            f"Iceberg {iceberg} on Spark 4.1: its SQL extensions drop bind parameters, so spark.sql(text, args) "
            "fails with UNBOUND_SQL_PARAMETER (apache/iceberg#16625, fixed in 1.12.0): load Iceberg 1.12.0 "
            "(ICESTREAM_JAR_SOURCE=maven, the platform's own Iceberg left off)"
        )
    elif not at_least(iceberg, "1.10.0"):
        warnings.append(
            f"Iceberg {iceberg}: remove_orphan_files lists through Hadoop's FileSystem "
            "(prefix_listing needs 1.10.0, apache/iceberg#12254); EMR and Glue provide s3:// there"
        )
    if version_tuple(python)[:2] != version_tuple(REQUIRED_PYTHON):
        warnings.append(
            f"Python {python}: icestream needs {REQUIRED_PYTHON} (datetime.UTC); ship the packed environment "
            "(icestream ship) and set PYSPARK_PYTHON=./icestream_env/bin/python"
        )
    return warnings


def iceberg_version(spark: SparkSession | None) -> str | None:
    """The Iceberg version the session's JVM loaded (``org.apache.iceberg.IcebergBuild.version()``), or None.

    One py4j call, no job: it answers in milliseconds once the session runs. None when there is no
    session (a dry run), no JVM (Spark Connect) or no Iceberg on the classpath.
    """
    context = getattr(spark, "sparkContext", None) if spark is not None else None
    jvm = getattr(context, "_jvm", None)
    if jvm is None:
        return None
    try:
        return str(jvm.org.apache.iceberg.IcebergBuild.version())
    except Exception:  # noqa: BLE001 - py4j raises its own errors when the class is missing
        return None


def class_loads(spark: SparkSession, class_name: str) -> bool:
    """Whether the driver's JVM finds ``class_name`` (``Class.forName`` without initialising it)."""
    jvm = jvm_of(spark)
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(class_name, False, loader)
    except Exception:  # noqa: BLE001 - py4j wraps ClassNotFoundException in its own error
        return False
    return True


# What the AWS profile loads by name (GlueCatalog, S3FileIO) and the AWS SDK classes they need at run time:
# the Iceberg runtime jar carries the first two without the SDK, so both kinds are checked.
AWS_CLASSES = (
    "org.apache.iceberg.aws.glue.GlueCatalog",
    "org.apache.iceberg.aws.s3.S3FileIO",
    "software.amazon.awssdk.services.glue.GlueClient",
    "software.amazon.awssdk.services.s3.S3Client",
)


@dataclass(frozen=True)
class SessionVersions:
    """What a running session provides (``icestream doctor`` on a cluster or platform).

    Attributes:
        spark: Spark's version.
        iceberg: Iceberg's version, None if no Iceberg runtime loaded.
        python: The driver's Python.
        missing_classes: Those of :data:`AWS_CLASSES` the driver's JVM does not find.
    """

    spark: str
    iceberg: str | None
    python: str
    missing_classes: tuple[str, ...]

    def line(self) -> str:
        """``Spark 3.5.4, Iceberg 1.7.1, Python 3.11.9 (driver); matches glue glue-5.0``."""
        rows = matching_platforms(self.spark, self.iceberg or "")
        where = ", ".join(f"{row.service} {row.release}" for row in rows) or "no row of the platform table"
        return f"Spark {self.spark}, Iceberg {self.iceberg or 'none'}, Python {self.python} (driver); matches {where}"

    def warnings(self) -> list[str]:
        """:func:`platform_warnings` for this session."""
        return platform_warnings(self.spark, self.iceberg, self.python)


def session_versions(spark: SparkSession) -> SessionVersions:
    """Read the running session's versions and which AWS classes its driver loads."""
    import platform

    missing = tuple(name for name in AWS_CLASSES if not class_loads(spark, name))
    return SessionVersions(spark.version, iceberg_version(spark), platform.python_version(), missing)
