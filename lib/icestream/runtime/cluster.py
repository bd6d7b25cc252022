"""Fit a new session into the cluster it runs on, instead of overriding the cluster's settings.

Under ``spark-submit`` (also an EMR step or a Glue job) the driver JVM is already running with
the cluster's configuration when icestream asks for a session; on a cluster node,
``spark-defaults.conf`` holds the platform's master, jars and Java options. icestream adds its
own settings to those: list-valued settings (extensions, jars, Java options, files) are joined,
any other setting the cluster already has is kept, and the master stays the cluster's unless
``ICESTREAM_SPARK_MASTER`` was set explicitly for a driver icestream starts itself.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path

from icestream.config import Settings

# Settings that hold lists: the cluster's entries come first, then icestream's (without repeats).
LIST_SEPARATORS = {
    "spark.sql.extensions": ",",
    "spark.jars": ",",
    "spark.jars.packages": ",",
    "spark.jars.excludes": ",",
    "spark.files": ",",
    "spark.archives": ",",
    "spark.submit.pyFiles": ",",
    "spark.driver.extraJavaOptions": " ",
    "spark.executor.extraJavaOptions": " ",
    "spark.driver.extraClassPath": ":",
    "spark.executor.extraClassPath": ":",
}


def spark_conf_dir() -> Path | None:
    """Where Spark reads ``spark-defaults.conf``: ``SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``.

    Returns:
        The folder, or None when there is none (a pip-installed pyspark without SPARK_HOME).
    """
    if os.environ.get("SPARK_CONF_DIR"):
        return Path(os.environ["SPARK_CONF_DIR"])
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"]) / "conf"
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.origin:
        return Path(spec.origin).parent / "conf"
    return None


def read_defaults(path: Path) -> dict[str, str]:
    """Read a ``spark-defaults.conf`` (``key value`` or ``key=value`` lines, ``#`` comments).

    Args:
        path: The file.

    Returns:
        Its settings (empty when the file does not exist).
    """
    if not path.is_file():
        return {}
    conf = {}
    for line in path.read_text(errors="replace").splitlines():
        text = line.strip()
        if not text or text.startswith(("#", "!")):
            continue
        separator = min((text.find(mark) for mark in (" ", "\t", "=") if mark in text), default=-1)
        if separator > 0:
            conf[text[:separator].strip()] = text[separator + 1 :].strip().lstrip("=").strip()
    return conf


def existing_conf() -> tuple[dict[str, str], bool]:
    """The configuration a new session must respect, and whether its driver is already running.

    A running driver is a live SparkContext in this process, or the JVM of ``spark-submit``,
    which started this Python process and passed its gateway in ``PYSPARK_GATEWAY_PORT``.
    Otherwise the platform's ``spark-defaults.conf`` (and ``MASTER``) is what a new driver would
    start from.

    Returns:
        ``(settings, driver_running)``.
    """
    from pyspark import SparkConf, SparkContext

    if SparkContext._active_spark_context is not None:
        return dict(SparkContext._active_spark_context.getConf().getAll()), True
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        SparkContext._ensure_initialized()
        return dict(SparkConf().getAll()), True
    folder = spark_conf_dir()
    defaults = read_defaults(folder / "spark-defaults.conf") if folder else {}
    if os.environ.get("MASTER") and "spark.master" not in defaults:
        defaults["spark.master"] = os.environ["MASTER"]
    return defaults, False


def with_master(settings: Settings, theirs: dict[str, str], running: bool) -> Settings:
    """Settings whose ``spark_master`` is the one the session will really have.

    Args:
        settings: The active settings.
        theirs: The cluster's configuration (:func:`existing_conf`).
        running: Whether the driver is already running (its master cannot change).

    Returns:
        ``settings`` with the running driver's master, or the platform's default master when
        ``spark_master`` was not set explicitly (a file, the environment or an argument).
    """
    master = theirs.get("spark.master")
    if not master or master == settings.spark_master:
        return settings
    if running or "spark_master" not in settings.sources:
        origin = "running driver" if running else "spark-defaults.conf"
        return dataclasses.replace(settings, spark_master=master, sources={**settings.sources, "spark_master": origin})
    return settings


def merged(ours: dict[str, str], theirs: dict[str, str]) -> dict[str, str]:
    """The settings to give the session builder so that the cluster's own survive.

    Args:
        ours: icestream's settings (:func:`icestream.runtime.spark.session_conf` plus what ships).
        theirs: The cluster's configuration (:func:`existing_conf`).

    Returns:
        ``ours`` without the keys the cluster already sets, except list-valued ones
        (:data:`LIST_SEPARATORS`), which hold the cluster's entries followed by ours.
    """
    result = {}
    for key, value in ours.items():
        if key not in theirs:
            result[key] = value
        elif key in LIST_SEPARATORS:
            separator = LIST_SEPARATORS[key]
            entries = [entry for entry in theirs[key].split(separator) if entry.strip()]
            entries += [entry for entry in value.split(separator) if entry.strip() and entry not in entries]
            result[key] = separator.join(entries)
    return result
