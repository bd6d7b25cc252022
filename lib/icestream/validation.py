"""What a valid setting is: allowed values, name patterns, and the checks :func:`load_settings` runs.

:func:`validate_identifier` is the one way a name reaches SQL text. Kept apart from
:mod:`icestream.config` (which builds settings) so that each stays one concern.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from icestream.errors import ConfigError
from icestream.limits import MAX_SHARD_COUNT, SCHEMA_EVOLUTION_MODES, START_POSITIONS
from icestream.stack import lines

ENV_PREFIX = "ICESTREAM_"
PROFILES = ("local", "localstack", "aws")
# "provided": the platform brings its own Iceberg (EMR, Glue --datalake-formats); checked at start-up.
JAR_SOURCES = ("auto", "maven", "provided")
# What a session on a non-local master ships to its executors (see icestream.runtime.shipping).
SHIP_MODES = ("packed", "package", "none")
CATALOG_TYPES = ("jdbc", "hadoop", "glue")
KAFKA_SECURITY = ("plaintext", "tls", "iam")  # the local broker; MSK over TLS; MSK with IAM auth
_KAFKA_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's own rule for topic names
_BOOTSTRAP = re.compile(r"^[A-Za-z0-9.-]+:\d{1,5}(,[A-Za-z0-9.-]+:\d{1,5})*$")
S3_SSE_TYPES = ("none", "s3", "kms")  # Iceberg S3FileIO's s3.sse.type values this project supports
ENDPOINT_SETTINGS = ("kinesis_endpoint", "s3_endpoint", "glue_endpoint")
MAX_KINESIS_TIMEOUT = 600  # seconds: longer than any Kinesis answer; a wait past it is no wait but a hang

MAX_IDENTIFIER_CHARS = 128  # a catalog, namespace, table or column name
_IDENTIFIER = re.compile(rf"^[A-Za-z_][A-Za-z0-9_]{{0,{MAX_IDENTIFIER_CHARS - 1}}}$")
_STREAM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_ACCOUNT_ID = re.compile(r"^\d{12}$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
_SPARK_MASTER = re.compile(
    r"^(local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?|local-cluster\[.+\]|spark://.+|yarn|k8s://.+|mesos://.+)$"
)


def validate_identifier(name: str, setting: str = "identifier") -> str:
    """Check that ``name`` is a plain SQL identifier; the only way names reach SQL text.

    Args:
        name: The candidate catalog, namespace, table or column name.
        setting: The setting it came from, named in the error.

    Returns:
        ``name`` unchanged.

    Raises:
        ConfigError: If ``name`` has characters other than letters, digits and underscores,
            starts with a digit, or is longer than 128 characters.
    """
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ConfigError(
            f"{setting}: {name!r} is not a valid identifier. Use letters, digits and "
            f"underscores, starting with a letter or underscore (at most {MAX_IDENTIFIER_CHARS} characters)."
        )
    return name


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """The nearest of ``known`` to a mistyped ``name``, as ``"; did you mean X?"``, or ``""`` when none is near.

    Shared by the settings and the notebooks' parameters, so that every typo is answered the same way.

    Args:
        name: What was typed.
        known: The valid names.

    Returns:
        The clause to put after the error's first part.
    """
    nearest = nearest_name(name, known)
    return f"; did you mean {nearest}?" if nearest else ""


def nearest_name(name: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` nearest to ``name`` (difflib's ratio, at least 0.6), or None."""
    return next(iter(difflib.get_close_matches(name, list(known), n=1)), None)


def _check(condition: bool, setting: str, message: str) -> None:
    if not condition:
        raise ConfigError(f"{ENV_PREFIX}{setting.upper()} / {setting}: {message}")


def _validate_endpoint(values: Mapping[str, Any], name: str) -> None:
    endpoint = values[name]
    if endpoint is None:
        return
    parsed = urlparse(endpoint)
    _check(
        parsed.scheme in ("http", "https") and bool(parsed.hostname) and not parsed.path.strip("/"),
        name,
        f"{endpoint!r} is not a URL like http://127.0.0.1:4566.",
    )
    try:
        parsed.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        _check(False, name, f"{endpoint!r} has an invalid port.")


def _validate_aws(values: Mapping[str, Any]) -> None:
    for name in ENDPOINT_SETTINGS:
        _validate_endpoint(values, name)
    catalog_id, role = values["glue_catalog_id"], values["aws_role_arn"]
    _check(
        catalog_id is None or bool(_ACCOUNT_ID.fullmatch(catalog_id)), "glue_catalog_id", "need a 12-digit account id."
    )
    _check(
        role is None or bool(_ROLE_ARN.fullmatch(role)),
        "aws_role_arn",
        f"{role!r}: need arn:aws:iam::<account>:role/<name>.",
    )
    _check(
        values["schema_evolution"] in SCHEMA_EVOLUTION_MODES,
        "schema_evolution",
        f"choose one of {', '.join(SCHEMA_EVOLUTION_MODES)}.",
    )
    _check(values["changes_format"] in ("flat", "debezium"), "changes_format", "choose flat or debezium.")
    _check(values["kafka_security"] in KAFKA_SECURITY, "kafka_security", f"choose {', '.join(KAFKA_SECURITY)}.")
    _check(
        bool(_KAFKA_TOPIC.fullmatch(values["kafka_topic"])),
        "kafka_topic",
        f"{values['kafka_topic']!r}: a topic name is 1 to 249 letters, digits, '.', '_' or '-'.",
    )
    bootstrap = values["kafka_bootstrap"]
    _check(
        bootstrap is None or bool(_BOOTSTRAP.fullmatch(bootstrap)),
        "kafka_bootstrap",
        f"{bootstrap!r}: need host:port, or several joined by commas (b-1.msk.example:9098,b-2.msk.example:9098).",
    )
    _check(
        values["changes_mode"] in ("merge-on-read", "copy-on-write"),
        "changes_mode",
        "choose merge-on-read or copy-on-write.",
    )
    _check(values["s3_sse_type"] in S3_SSE_TYPES, "s3_sse_type", f"choose one of {', '.join(S3_SSE_TYPES)}.")
    _check(values["s3_sse_key"] is None or values["s3_sse_type"] == "kms", "s3_sse_key", "a key needs s3_sse_type=kms.")
    # s3a:// is Hadoop's S3A file system: Glue would record it as the table location, and Athena,
    # EMR and Glue jobs expect s3:// (Iceberg's S3FileIO reads both, writes what it is given).
    if values["warehouse"].startswith(("s3a://", "s3n://")):
        _check(
            False,
            "warehouse",
            f"{values['warehouse']!r}: use s3://{values['warehouse'].split('://', 1)[1]} instead; Glue records the "
            "warehouse in every table's location, and Athena and Glue jobs expect s3://.",
        )


def validate_settings(values: Mapping[str, Any]) -> None:
    """Check every setting's value; the first bad one raises.

    Args:
        values: Every setting by name (``vars(settings)``): the rules read values, not the settings object,
            so that :mod:`icestream.config`, which builds that object, is the only module that knows it.

    Raises:
        ConfigError: Naming the setting (as its environment variable and its name) and what to do.
    """
    _validate_aws(values)
    _check(
        bool(_REGION.fullmatch(values["region"])),
        "region",
        f"{values['region']!r} is not an AWS region like us-east-1.",
    )
    _check(
        bool(_STREAM_NAME.fullmatch(values["stream_name"])),
        "stream_name",
        f"{values['stream_name']!r} is not a valid Kinesis stream name (1-128 of A-Z a-z 0-9 _ . -).",
    )
    _check(
        0 <= values["emulator_port"] <= 65_535,
        "emulator_port",
        f"{values['emulator_port']} is not a TCP port: give 1 to 65535, or 0 for a free one at each start.",
    )
    _check(
        0 < values["kinesis_timeout"] <= MAX_KINESIS_TIMEOUT,  # NaN fails both comparisons
        "kinesis_timeout",
        f"{values['kinesis_timeout']} must be seconds above 0, at most {MAX_KINESIS_TIMEOUT}.",
    )
    _check(
        1 <= values["shard_count"] <= MAX_SHARD_COUNT,
        "shard_count",
        f"{values['shard_count']} must be between 1 and {MAX_SHARD_COUNT}.",
    )
    for name in ("catalog", "namespace", "table"):
        validate_identifier(values[name], f"{ENV_PREFIX}{name.upper()} / {name}")
    _check(values["catalog_type"] in CATALOG_TYPES, "catalog_type", f"choose one of {', '.join(CATALOG_TYPES)}.")
    _check(values["jar_source"] in JAR_SOURCES, "jar_source", f"choose one of {', '.join(JAR_SOURCES)}.")
    _check(values["ship"] in SHIP_MODES, "ship", f"choose one of {', '.join(SHIP_MODES)}.")
    _check(
        bool(_SPARK_MASTER.fullmatch(values["spark_master"])),
        "spark_master",
        f"{values['spark_master']!r} is not a Spark master URL (local[*], spark://host:7077, yarn, k8s://...).",
    )
    _check(
        values["spark_log_level"].upper() in ("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN"),
        "spark_log_level",
        f"{values['spark_log_level']!r} is not a log4j level.",
    )
    _check(
        1 <= values["archive_retention_days"] <= 36_500,
        "archive_retention_days",
        f"{values['archive_retention_days']} must be between 1 and 36500.",
    )
    _check(
        values["start_position"] in START_POSITIONS,
        "start_position",
        f"choose one of {', '.join(START_POSITIONS)}.",
    )
    if values.get("spark_line") is not None:
        _check(
            values["spark_line"] in lines(),
            "spark_line",
            f"choose one of the pinned lines {', '.join(sorted(lines()))} (lib/icestream/stack.toml).",
        )
    _check(
        bool(re.fullmatch(r"\d+\.\d+\.\d+", values["iceberg_version"])),
        "iceberg_version",
        "expected a version like 1.10.2.",
    )
    if values["catalog_type"] == "glue":
        _check(
            values["warehouse"].startswith("s3://"),
            "warehouse",
            "the Glue catalog needs an S3 warehouse such as s3://my-bucket/warehouse.",
        )
    else:
        _check(bool(values["warehouse"]), "warehouse", "must not be empty.")
    if values["catalog_type"] == "hadoop":
        # Iceberg's Hadoop catalog commits by renaming a metadata file, which S3 cannot do atomically, and
        # off EMR Hadoop has no s3:// file system at all: setup made the stream, then Spark failed on the tables.
        _check(
            not values["warehouse"].startswith("s3://"),
            "catalog_type",
            f"hadoop cannot keep tables in the s3:// warehouse {values['warehouse']!r} (its commits rename files, "
            "which S3 cannot do atomically): use catalog_type glue for an s3:// warehouse (the aws profile's "
            "default), or a local folder as the warehouse.",
        )
    if values["catalog_type"] == "jdbc":
        _check(
            "://" not in values["warehouse"],
            "warehouse",
            f"{values['warehouse']!r}: the JDBC catalog keeps its SQLite file in the warehouse, which must be a "
            "local folder; for S3 use the aws profile (Glue).",
        )


# The folders on this machine that setup and ingest write into (the catalog and tables; the ingest's progress).
WRITTEN_FOLDERS = ("warehouse", "run_dir")


class FolderSettings(Protocol):
    """What :func:`check_writable_folders` needs of the settings: a folder setting's path (``Settings.path``)."""

    def path(self, setting: str) -> Path: ...


def check_writable_folders(settings: FolderSettings, names: Iterable[str] = WRITTEN_FOLDERS) -> None:
    """Check that each folder setting names a folder this process can write, or can create.

    Run before a command creates anything (a stream, a table): a warehouse that is a file failed only once
    the stream existed, and a run folder that cannot be written once the first batch had committed. As
    root may write where permissions forbid it, the check tries: it makes a folder and removes it at once.
    A warehouse given as a URI (``s3://``) is not checked.

    Args:
        settings: The settings.
        names: The folder settings to check.

    Raises:
        ConfigError: If a folder is a file, lies under one, or cannot be written, naming the setting and why.
    """
    for name in names:
        if "://" not in getattr(settings, name):
            _check_writable_folder(settings.path(name), name)


def _check_writable_folder(folder: Path, setting: str) -> None:
    nearest = folder  # the folder, or the nearest part of its path that exists: where it would be made
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if not nearest.is_dir():
        inside = "" if nearest == folder else f" (the folder {folder} would be inside it)"
        _check(False, setting, f"{nearest} is a file, not a folder{inside}: give a folder's path, or move the file.")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".icestream-write-check-", dir=nearest))
    except OSError as error:
        _check(
            False,
            setting,
            f"{folder} cannot be written ({error.strerror} when making a folder in {nearest}): "
            "give a folder this user can write.",
        )
