"""The EMR Serverless job runs the stack starts: their request, their environment, their schedules.

Each job runs in the packed environment ``icestream ship`` uploads (``icestream_env.tar.gz`` under
the artifacts folder: Python 3.11, icestream and its job dependencies), unpacked by Spark from
``spark.archives`` as ``./icestream_env`` on the driver and every executor, as AWS documents for
Python dependencies on EMR Serverless ("Using Python libraries with EMR Serverless").

Each schedule starts a small Step Functions state machine (a templated target), whose one Task calls
``StartJobRun`` with a client token hashed from the schedule's ARN and the scheduled time: the
same on every retry of one scheduled time, so a retry after a start that timed out but succeeded
gets the first run back instead of a second one (docs/aws.md, "Failures"). A start the scheduler
cannot make after its retries goes to the dead-letter queue; an execution that fails, to the
alarm topic (``alarms``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from icestream.deploy.stack.common import ARN
from icestream.deploy.stack.parameters import application_id
from icestream.errors import ConfigError

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
# The AWS SDK integration, not the optimized one (``states:::emr-serverless:startJobRun``): its parameters
# are StartJobRun's own members (checked against botocore's model) and it needs no permission beyond
# emr-serverless:StartJobRun; the optimized one wraps the API in a shape of its own.
START_JOB_RUN = f"{ARN}:states:::aws-sdk:emrserverless:startJobRun"
# What the schedule hands the state machine: its own ARN (one per stack and job) and the scheduled time,
# both the same on every retry of one invocation (<aws.scheduler.execution-id> is new for each attempt,
# AWS: "Adding context attributes in EventBridge Scheduler").
SCHEDULE_INPUT = {"schedule": "<aws.scheduler.schedule-arn>", "scheduled_time": "<aws.scheduler.scheduled-time>"}
# EMR Serverless's clientToken must match [A-Za-z0-9._-]{1,64} (botocore's model) and the scheduled time has
# colons (2022-03-22T18:59:43Z): the token is the SHA-256, in hex (64 characters), of the two, stable across
# retries and distinct across jobs, stacks and times. (The state machine's own ARN, $$.StateMachine.Id,
# would do as well, but "$$" inside Fn::Sub is read as an escaped "$" by moto's CloudFormation.)
CLIENT_TOKEN = "States.Hash(States.Format('{}|{}', $.schedule, $.scheduled_time), 'SHA-256')"  # noqa: S105
START_TIMEOUT_SECONDS = 60  # one StartJobRun call; a call that hangs is retried with the same token
START_RETRY = {"IntervalSeconds": 10, "MaxAttempts": 2, "BackoffRate": 2.0}  # as the scheduler's: two retries


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


@dataclass(frozen=True)
class JobRun:
    """One EMR Serverless job run of the stack: its script, arguments, name, role and mode."""

    entry_point: str  # the script's file name under the artifacts folder
    arguments: list[str]  # its command-line arguments
    name: str  # the run's name
    role: str = "IngestJobRole"  # logical id of the execution role (or MaintenanceJobRole)
    # A ${...} expression (or number) of minutes: a STREAMING run with that ExecutionTimeoutMinutes; None: batch.
    streaming_timeout: str | None = None

    def request(self) -> dict[str, Any]:
        """The ``StartJobRun`` request (PascalCase, no client token) with the stack's ``${...}`` variables."""
        request: dict[str, Any] = {
            "ApplicationId": "${ApplicationId}",
            "ExecutionRoleArn": f"${{{self.role}.Arn}}",
            "Name": self.name,
            "JobDriver": {
                "SparkSubmit": {
                    "EntryPoint": f"s3://${{WarehouseBucket}}/${{ArtifactsPrefix}}/{self.entry_point}",
                    "EntryPointArguments": self.arguments,
                    "SparkSubmitParameters": spark_submit_parameters(),
                }
            },
        }
        if self.streaming_timeout is not None:
            request |= {"Mode": "STREAMING", "ExecutionTimeoutMinutes": self.streaming_timeout}
        return request


def _text(node: Any, streaming_timeout: str | None) -> str:
    """JSON text for ``Fn::Sub``; the timeout (a number in JSON, from a parameter) goes in unquoted."""
    text = json.dumps(node, indent=None, separators=(",", ":"))
    return text.replace(f'"{streaming_timeout}"', str(streaming_timeout)) if streaming_timeout else text


def job_run_input(
    entry_point: str,
    arguments: list[str],
    name: str,
    role: str = "IngestJobRole",
    streaming_timeout: str | None = None,
) -> str:
    """The EMR Serverless ``StartJobRun`` request of a job (no client token), as JSON text for ``Fn::Sub``.

    Its ``${...}`` variables are the stack's: ``${ApplicationId}``, ``${<role>.Arn}``,
    ``${WarehouseBucket}``, ``${ArtifactsPrefix}``, ``${WarehousePrefix}``, ``${StreamName}``,
    ``${Namespace}``, ``${DataKey.Arn}``, ``${AWS::Region}``. Keys are PascalCase, as Step Functions'
    AWS SDK integrations take them; :func:`start_job_run_definition` adds the token and the run's name.

    Args:
        entry_point: The script's file name under the artifacts folder.
        arguments: Its command-line arguments.
        name: The job run's name.
        role: Logical id of the execution role (``IngestJobRole`` or ``MaintenanceJobRole``).
        streaming_timeout: A ``${...}`` expression (or number) of minutes: a STREAMING job with that
            ``ExecutionTimeoutMinutes``; ``None``: a batch job run.

    Returns:
        The JSON text.
    """
    return _text(JobRun(entry_point, arguments, name, role, streaming_timeout).request(), streaming_timeout)


def start_job_run_definition(run: JobRun) -> str:
    """The state machine a schedule starts (Amazon States Language, JSON text for ``Fn::Sub``).

    One Task calls ``StartJobRun`` with the run's request, the run named after the scheduled time and
    :data:`CLIENT_TOKEN` as its token. The Task retries a failed or hung call itself: with the same
    token, a call that did start a run returns that run.
    """
    parameters = run.request()
    del parameters["Name"]
    parameters |= {
        "Name.$": f"States.Format('{run.name} {{}}', $.scheduled_time)",
        "ClientToken.$": CLIENT_TOKEN,
    }
    task = {
        "Type": "Task",
        "Comment": "Start the job run; the token makes a repeated start of one scheduled time return the first run",
        "Resource": START_JOB_RUN,
        "Parameters": parameters,
        "TimeoutSeconds": START_TIMEOUT_SECONDS,
        "Retry": [{"ErrorEquals": ["States.TaskFailed", "States.Timeout"], **START_RETRY}],
        "End": True,
    }
    definition = {
        "Comment": f"{run.name}: one idempotent StartJobRun",
        "StartAt": "StartJobRun",
        "States": {"StartJobRun": task},
    }
    return _text(definition, run.streaming_timeout)


@dataclass(frozen=True)
class Job:
    """A scheduled job: its schedule and the state machine that starts its runs share ``<stack>-<suffix>``."""

    logical_id: str  # the schedule's (IngestSchedule); its state machine's is IngestStarter
    condition: str | None
    description: str
    expression: str  # the parameter holding the schedule expression
    suffix: str
    run: JobRun

    @property
    def starter(self) -> str:
        """The state machine's logical id."""
        return self.logical_id.removesuffix("Schedule") + "Starter"

    @property
    def starter_arn(self) -> str:
        """The state machine's ARN, from its name (``Fn::Sub``): what roles and rules name without a cycle."""
        return f"{ARN}:states:${{AWS::Region}}:${{AWS::AccountId}}:stateMachine:${{AWS::StackName}}-{self.suffix}"


JOBS = [
    Job(
        "IngestSchedule",
        "BatchIngest",
        "Drain the stream into the Iceberg tables (the job stops when caught up)",
        "IngestScheduleExpression",
        "ingest",
        JobRun("ingest.py", ["--available-now"], "icestream-ingest"),
    ),
    Job(
        "StreamingIngestSchedule",
        "StreamingEnabled",
        "Start the long-running streaming ingest; it ends at its timeout, before the next start",
        "StreamingScheduleExpression",
        "streaming-ingest",
        JobRun(
            "ingest.py",
            ["--trigger", "${StreamingTrigger}"],
            "icestream-streaming-ingest",
            streaming_timeout="${StreamingTimeoutMinutes}",
        ),
    ),
    Job(
        "MaintenanceSchedule",
        None,
        "Compact, rewrite manifests, expire snapshots, remove orphans",
        "MaintenanceScheduleExpression",
        "maintenance",
        JobRun("icestream_cli.py", ["maintain"], "icestream-maintain", role="MaintenanceJobRole"),
    ),
]


def _state_machine(job: Job) -> dict[str, Any]:
    definition = start_job_run_definition(job.run)
    return {
        "Type": "AWS::StepFunctions::StateMachine",
        **({"Condition": job.condition} if job.condition else {}),
        "Properties": {
            "StateMachineName": {"Fn::Sub": f"${{AWS::StackName}}-{job.suffix}"},
            "StateMachineType": "STANDARD",  # exactly-once execution, and its history kept 90 days
            "RoleArn": {"Fn::GetAtt": ["JobStarterRole", "Arn"]},
            "DefinitionString": {"Fn::Sub": [definition, {"ApplicationId": application_id()}]},
        },
    }


def _schedule(job: Job) -> dict[str, Any]:
    return {
        "Type": "AWS::Scheduler::Schedule",
        **({"Condition": job.condition} if job.condition else {}),
        "Properties": {
            "Name": {"Fn::Sub": f"${{AWS::StackName}}-{job.suffix}"},
            "Description": job.description,
            "ScheduleExpression": {"Ref": job.expression},
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": {"Ref": "SchedulesState"},
            "Target": {
                "Arn": {"Ref": job.starter},  # a templated target: Step Functions StartExecution
                "RoleArn": {"Fn::GetAtt": ["SchedulerRole", "Arn"]},
                "Input": json.dumps(SCHEDULE_INPUT),
                "RetryPolicy": {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600},
                "DeadLetterConfig": {"Arn": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}},
            },
        },
    }


def schedules() -> dict[str, Any]:
    """The ingest (AvailableNow, or a long-running streaming job) and the maintenance schedules, each with
    the state machine it starts."""
    made: dict[str, Any] = {}
    for job in JOBS:
        made[job.starter] = _state_machine(job)
        made[job.logical_id] = _schedule(job)
    return made


def starter_arns() -> list[str]:
    """Every job's state machine ARN (``Fn::Sub`` text), whether or not its condition holds."""
    return [job.starter_arn for job in JOBS]


def api_names(node: Any) -> Any:
    """The request's PascalCase members as the API's camelCase ones (what the CLI and boto3 take)."""
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
    missing = sorted(set(VARIABLE.findall(json.dumps(text))) - set(values))
    if missing:
        raise ConfigError(f"no value for {', '.join(missing)}: pass the stack's outputs (docs/aws.md).")
    return api_names(json.loads(VARIABLE.sub(lambda match: values[match.group(1)], json.dumps(text))))


def start_job_run_command(entry_point: str, arguments: list[str], name: str, role: str = "IngestJobRole") -> str:
    """The ``aws emr-serverless start-job-run`` line that starts the same run by hand (for ``Fn::Sub``).

    No client token: the CLI makes its own.
    """
    request = json.loads(job_run_input(entry_point, arguments, name, role))
    return "aws emr-serverless start-job-run --cli-input-json '" + json.dumps(api_names(request)) + "'"
