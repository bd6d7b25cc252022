"""The EMR Serverless job runs the stack starts: their request, their environment, their schedules.

Each job runs in the packed environment ``icestream ship`` uploads (``icestream_env.tar.gz`` under
the artifacts folder: Python 3.11, icestream and its job dependencies), unpacked by Spark from
``spark.archives`` as ``./icestream_env`` on the driver and every executor, as AWS documents for
Python dependencies on EMR Serverless ("Using Python libraries with EMR Serverless"). EventBridge
Scheduler calls ``StartJobRun`` (a universal target); a call that still fails after its retries goes
to the dead-letter queue (``alarms``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from icestream.errors import ConfigError
from icestream.operations.stack.common import ARN
from icestream.operations.stack.parameters import application_id

ENV_ARCHIVE = "icestream_env.tar.gz"  # what `icestream ship` uploads under the artifacts folder
ENV_ALIAS = "icestream_env"  # the folder Spark unpacks it to, in each container's working directory
ENV_PYTHON = f"./{ENV_ALIAS}/bin/python"
EMR_SERVERLESS_ICEBERG_JAR = "/usr/share/aws/iceberg/lib/iceberg-spark3-runtime.jar"  # EMR's own Iceberg
# The jobs' settings (icestream.config reads ICESTREAM_<SETTING>), as the driver's environment.
JOB_ENVIRONMENT = {
    "ICESTREAM_PROFILE": "aws",
    "ICESTREAM_REGION": "${AWS::Region}",
    "ICESTREAM_STREAM_NAME": "${StreamName}",
    "ICESTREAM_WAREHOUSE": "s3://${WarehouseBucket}/${WarehousePrefix}",
    "ICESTREAM_NAMESPACE": "${Namespace}",
    "ICESTREAM_KMS_KEY_ID": "${DataKey.Arn}",
    "ICESTREAM_JAR_SOURCE": "provided",  # EMR's Iceberg, not jars from Maven
    "ICESTREAM_SHIP": "none",  # icestream is in the packed environment Spark unpacks (spark.archives)
}
VARIABLE = re.compile(r"\$\{([\w:.]+)\}")  # an Fn::Sub variable
SCHEDULER_TARGET = f"{ARN}:scheduler:::aws-sdk:emrserverless:startJobRun"
# EMR Serverless's clientToken must match [A-Za-z0-9._-]+ (botocore's model, StartJobRun): the
# scheduled time (2022-03-22T18:59:43Z) has colons, so the token cannot carry it; the execution id
# can, and is unique per attempt (docs/aws.md, "Failures": why a retry cannot start a second ingest).
CLIENT_TOKEN = "<aws.scheduler.execution-id>"  # noqa: S105 (an idempotency token, no secret)
RUN_NAME_SUFFIX = " <aws.scheduler.scheduled-time>"  # the run's name says which scheduled time started it


def spark_submit_parameters() -> str:
    """The ``--conf`` options of every job run: EMR's Iceberg, the packed Python, icestream's settings."""
    conf = {
        "spark.jars": EMR_SERVERLESS_ICEBERG_JAR,
        "spark.archives": f"s3://${{WarehouseBucket}}/${{ArtifactsPrefix}}/{ENV_ARCHIVE}#{ENV_ALIAS}",
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON": ENV_PYTHON,
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": ENV_PYTHON,
        "spark.executorEnv.PYSPARK_PYTHON": ENV_PYTHON,
    }
    conf |= {f"spark.emr-serverless.driverEnv.{key}": value for key, value in JOB_ENVIRONMENT.items()}
    return " ".join(f"--conf {key}={value}" for key, value in conf.items())


def job_run_input(
    entry_point: str,
    arguments: list[str],
    name: str,
    role: str = "IngestJobRole",
    streaming_timeout: str | None = None,
) -> str:
    """The EMR Serverless ``StartJobRun`` request a schedule sends, as JSON text for ``Fn::Sub``.

    Its ``${...}`` variables are the stack's: ``${ApplicationId}``, ``${<role>.Arn}``,
    ``${WarehouseBucket}``, ``${ArtifactsPrefix}``, ``${WarehousePrefix}``, ``${StreamName}``,
    ``${Namespace}``, ``${DataKey.Arn}``, ``${AWS::Region}``; ``<aws.scheduler.*>`` are the
    scheduler's context attributes. Keys are PascalCase, as universal targets take them.

    Args:
        entry_point: The script's file name under the artifacts folder.
        arguments: Its command-line arguments.
        name: The job run's name (the scheduled time is appended).
        role: Logical id of the execution role (``IngestJobRole`` or ``MaintenanceJobRole``).
        streaming_timeout: A ``${...}`` expression (or number) of minutes: a STREAMING job with that
            ``ExecutionTimeoutMinutes``; ``None``: a batch job run.

    Returns:
        The JSON text.
    """
    request: dict[str, Any] = {
        "ApplicationId": "${ApplicationId}",
        "ExecutionRoleArn": f"${{{role}.Arn}}",
        "ClientToken": CLIENT_TOKEN,
        "Name": name + RUN_NAME_SUFFIX,
        "JobDriver": {
            "SparkSubmit": {
                "EntryPoint": f"s3://${{WarehouseBucket}}/${{ArtifactsPrefix}}/{entry_point}",
                "EntryPointArguments": arguments,
                "SparkSubmitParameters": spark_submit_parameters(),
            }
        },
    }
    if streaming_timeout is not None:
        request |= {"Mode": "STREAMING", "ExecutionTimeoutMinutes": streaming_timeout}
    text = json.dumps(request, indent=None, separators=(",", ":"))
    # A number in JSON, from a parameter: the placeholder goes in unquoted.
    return text.replace(f'"{streaming_timeout}"', str(streaming_timeout)) if streaming_timeout else text


def _schedule(condition: str | None, description: str, expression: str, state: Any, name: str, request: str) -> dict:
    return {
        "Type": "AWS::Scheduler::Schedule",
        **({"Condition": condition} if condition else {}),
        "Properties": {
            "Name": {"Fn::Sub": f"${{AWS::StackName}}-{name}"},
            "Description": description,
            "ScheduleExpression": {"Ref": expression},
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": state,
            "Target": {
                "Arn": {"Fn::Sub": SCHEDULER_TARGET},
                "RoleArn": {"Fn::GetAtt": ["SchedulerRole", "Arn"]},
                "Input": {"Fn::Sub": [request, {"ApplicationId": application_id()}]},
                "RetryPolicy": {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600},
                "DeadLetterConfig": {"Arn": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}},
            },
        },
    }


def schedules() -> dict[str, Any]:
    """The ingest (AvailableNow, or a long-running streaming job) and the maintenance schedules."""
    return {
        "IngestSchedule": _schedule(
            "BatchIngest",
            "Drain the stream into the Iceberg tables (the job stops when caught up)",
            "IngestScheduleExpression",
            {"Ref": "SchedulesState"},
            "ingest",
            job_run_input("ingest.py", ["--available-now"], "icestream-ingest"),
        ),
        "StreamingIngestSchedule": _schedule(
            "StreamingEnabled",
            "Start the long-running streaming ingest; it ends at its timeout, before the next start",
            "StreamingScheduleExpression",
            {"Ref": "SchedulesState"},
            "streaming-ingest",
            job_run_input(
                "ingest.py",
                ["--trigger", "${StreamingTrigger}"],
                "icestream-streaming-ingest",
                streaming_timeout="${StreamingTimeoutMinutes}",
            ),
        ),
        "MaintenanceSchedule": _schedule(
            None,
            "Compact, rewrite manifests, expire snapshots, remove orphans",
            "MaintenanceScheduleExpression",
            {"Ref": "SchedulesState"},
            "maintenance",
            job_run_input("icestream_cli.py", ["maintain"], "icestream-maintain", role="MaintenanceJobRole"),
        ),
    }


def api_names(node: Any) -> Any:
    """A universal target's PascalCase members as the API's camelCase ones (what the CLI and boto3 take)."""
    if isinstance(node, dict):
        return {key[0].lower() + key[1:]: api_names(value) for key, value in node.items()}
    return [api_names(value) for value in node] if isinstance(node, list) else node


def start_job_run_request(
    entry_point: str, arguments: list[str], name: str, values: dict[str, str], role: str = "IngestJobRole"
) -> dict[str, Any]:
    """The same run as a ready ``StartJobRun`` request (camelCase, no client token), for a deployed stack.

    Args:
        entry_point: The script's file name under the artifacts folder.
        arguments: Its command-line arguments.
        name: The job run's name.
        values: The stack's values for the request's variables (``ApplicationId``, ``<role>.Arn``,
            ``WarehouseBucket``, ``ArtifactsPrefix``, ``WarehousePrefix``, ``StreamName``, ``Namespace``,
            ``DataKey.Arn``, ``AWS::Region``), e.g. from the stack's outputs.

    Returns:
        The request, for ``boto3.client("emr-serverless").start_job_run(**request)`` or ``--cli-input-json``.

    Raises:
        ConfigError: If a variable has no value.
    """
    text = json.loads(job_run_input(entry_point, arguments, name, role))
    del text["ClientToken"]
    text["Name"] = name
    missing = sorted(set(VARIABLE.findall(json.dumps(text))) - set(values))
    if missing:
        raise ConfigError(f"no value for {', '.join(missing)}: pass the stack's outputs (docs/aws.md).")
    return api_names(json.loads(VARIABLE.sub(lambda match: values[match.group(1)], json.dumps(text))))


def start_job_run_command(entry_point: str, arguments: list[str], name: str, role: str = "IngestJobRole") -> str:
    """The ``aws emr-serverless start-job-run`` line that starts the same run by hand (for ``Fn::Sub``).

    The scheduler's context attributes are left out: the CLI makes its own client token.
    """
    request = json.loads(job_run_input(entry_point, arguments, name, role))
    del request["ClientToken"]
    request["Name"] = name
    return "aws emr-serverless start-job-run --cli-input-json '" + json.dumps(api_names(request)) + "'"
