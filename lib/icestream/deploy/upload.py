"""What ``icestream ship --target emr-serverless|glue`` writes and prints for a deployed stack.

The upload folder holds the stamped entry points (:mod:`icestream.runtime.build_stamp`) and, for EMR
Serverless, the packed environment with icestream inside (``icestream_env.tar.gz``, which the stack's
job runs unpack through ``spark.archives``); for Glue, icestream's zip for ``--extra-py-files`` (Glue
5.x runs Python 3.11 itself). The printed lines copy them under the stack's artifacts prefix and
start (EMR Serverless) or create (Glue) the ingest and maintenance jobs with the stack's values.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from icestream.deploy.stack.jobs import ENV_ARCHIVE, JOB_ENVIRONMENT, VARIABLE, start_job_run_request
from icestream.errors import ConfigError
from icestream.runtime.build_stamp import PACKAGE, build_id, stamp

TARGETS = ("emr-serverless", "glue")
# By path, not by import: the command line that ships them must not import them (nor they it).
ENTRY_POINTS = {"ingest.py": PACKAGE / "jobs" / "ingest.py", "icestream_cli.py": PACKAGE / "jobs" / "cli.py"}
# name, entry point, arguments, execution role's logical id: the stack's two jobs.
JOBS = (
    ("icestream-ingest", "ingest.py", ["--available-now"], "IngestJobRole"),
    ("icestream-maintain", "icestream_cli.py", ["maintain"], "MaintenanceJobRole"),
)
GLUE_VERSION = "5.1"
GLUE_ZIP = "icestream.zip"
# What Glue 5.x lacks of the job core (its own boto3, pandas, pyarrow, PyYAML serve; not confirmed here).
GLUE_MODULES = "msgspec==0.22.0"


def stack_values(described: dict[str, Any]) -> dict[str, str]:
    """The stack's outputs and parameters by name, and ``AWS::Region``, from ``describe-stacks`` JSON.

    Raises:
        ConfigError: If the JSON holds no stack.
    """
    stacks = described.get("Stacks") or []
    if not stacks:
        raise ConfigError(
            "the describe-stacks JSON has no stack: save `aws cloudformation describe-stacks --stack-name ...`."
        )
    stack = stacks[0]
    values = {item["ParameterKey"]: item["ParameterValue"] for item in stack.get("Parameters", [])}
    values |= {item["OutputKey"]: item["OutputValue"] for item in stack.get("Outputs", [])}
    if stack.get("StackId", "").count(":") >= 5:
        values.setdefault("AWS::Region", stack["StackId"].split(":")[3])
    return values


def write_entry_points(folder: Path) -> list[Path]:
    """The entry points, stamped with this package's build, into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    build, written = build_id(), []
    for name, source in ENTRY_POINTS.items():
        (target := folder / name).write_text(stamp(source.read_text(), build))
        written.append(target)
    return written


def copy_into(folder: Path, artifact: Path, name: str) -> Path:
    """``artifact`` as ``folder/name`` (a hard link when the file system allows it)."""
    target = folder / name
    target.unlink(missing_ok=True)
    try:
        target.hardlink_to(artifact)
    except OSError:
        shutil.copy2(artifact, target)
    return target


def _need(values: dict[str, str], *names: str) -> None:
    missing = [name for name in names if not values.get(name)]
    if missing:
        raise ConfigError(
            f"no value for {', '.join(missing)}: pass --stack-json or --value NAME=VALUE (docs/platforms.md)."
        )


def upload_lines(files: list[Path], values: dict[str, str]) -> list[str]:
    """``aws s3 cp`` lines copying ``files`` under ``s3://<WarehouseBucket>/<ArtifactsPrefix>/``."""
    _need(values, "WarehouseBucket", "ArtifactsPrefix")
    where = f"s3://{values['WarehouseBucket']}/{values['ArtifactsPrefix']}"
    return [f"aws s3 cp {path} {where}/{path.name}" for path in files]


def emr_serverless_lines(values: dict[str, str]) -> list[str]:
    """``aws emr-serverless start-job-run`` lines for the stack's ingest and maintenance runs."""
    lines = []
    for name, entry_point, arguments, role in JOBS:
        request = start_job_run_request(entry_point, arguments, name, values, role)
        lines.append(f"aws emr-serverless start-job-run --cli-input-json '{json.dumps(request)}'")
    return lines


def glue_lines(values: dict[str, str], glue_version: str = GLUE_VERSION) -> list[str]:
    """The ``aws glue create-job`` and ``start-job-run`` lines of the ingest (settings as ``--ICESTREAM_*``).

    Only the ingest: Glue hands a script its own ``--JOB_ID ...`` arguments, which
    :mod:`icestream.jobs.ingest` accepts and the command line of ``maintain`` does not.
    """
    _need(values, "WarehouseBucket", "ArtifactsPrefix", "IngestJobRole.Arn")
    where = f"s3://{values['WarehouseBucket']}/{values['ArtifactsPrefix']}"
    settings = {f"--{key}": value for key, value in JOB_ENVIRONMENT.items() if key != "ICESTREAM_SHIP"}
    settings |= {
        "--datalake-formats": "iceberg",
        "--extra-py-files": f"{where}/{GLUE_ZIP}",
        "--additional-python-modules": GLUE_MODULES,
        "--available-now": "",
    }
    text = VARIABLE.sub(lambda match: _value(values, match.group(1)), json.dumps(settings))
    command = {"Name": "glueetl", "ScriptLocation": f"{where}/ingest.py", "PythonVersion": "3"}
    return [
        f"aws glue create-job --name icestream-ingest --role {values['IngestJobRole.Arn']} "
        f"--glue-version {glue_version} --command '{json.dumps(command)}' --default-arguments '{text}'",
        "aws glue start-job-run --job-name icestream-ingest",
    ]


def _value(values: dict[str, str], name: str) -> str:
    _need(values, name)
    return values[name]


__all__ = ["ENV_ARCHIVE", "TARGETS", "emr_serverless_lines", "glue_lines", "stack_values", "upload_lines"]
