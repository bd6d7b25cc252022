"""The job starters: a schedule's retries start one job run, not two.

EventBridge Scheduler retries a target it could not reach; a retry after a start that timed out but
succeeded must get the first run back, so the ``StartJobRun`` client token must be the same on every
attempt of one scheduled time. The state machines derive it with Amazon States Language intrinsics;
:func:`intrinsic` below computes those with ``hashlib`` as the States Language documents them
(``States.Format`` fills ``{}`` in order, ``States.Hash`` is the hex digest of the UTF-8 text), so
the test shows which token each attempt would send. ``tests/integration/test_deploy_moto.py`` runs
the same expression in moto's interpreter as well. Neither is AWS's own.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters

from icestream.deploy import cloudformation
from icestream.deploy.stack import jobs
from icestream.deploy.stack.jobs import api_names
from tests.helpers.cloudformation import NO_VALUE, resolve

ACCOUNT_ID, REGION = "123456789012", "eu-west-1"
STACK = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT_ID,
    "AWS::Partition": "aws",
    "AWS::StackName": "icestream",
    "AWS::NoValue": NO_VALUE,
    "StreamName": "ev",
    "WarehouseBucket": "lake-bucket",
    "WarehousePrefix": "icestream",
    "Namespace": "analytics",
    "ArtifactsPrefix": "artifacts",
    "EmrServerlessApplicationId": "00abc123def456",
    "Application.ApplicationId": "00created0000",
    "DataKey.Arn": f"arn:aws:kms:{REGION}:{ACCOUNT_ID}:key/k",
    "IngestJobRole.Arn": f"arn:aws:iam::{ACCOUNT_ID}:role/ingest",
    "MaintenanceJobRole.Arn": f"arn:aws:iam::{ACCOUNT_ID}:role/maintenance",
    "JobStarterRole.Arn": f"arn:aws:iam::{ACCOUNT_ID}:role/starter",
    "SchedulerRole.Arn": f"arn:aws:iam::{ACCOUNT_ID}:role/scheduler",
    "DeadLetterQueue.Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:dlq",
    "FailedJobRunRule.Arn": f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/failed-runs",
    "FailedStartRule.Arn": f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/failed-starts",
    "AlarmTopic": f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:alarms",
    "StreamingTrigger": "30s",
    "StreamingTimeoutMinutes": "1430",
}
JOBS = jobs.JOBS
STARTERS = {job.logical_id: job for job in JOBS}
STACK |= {job.starter: f"arn:aws:states:{REGION}:{ACCOUNT_ID}:stateMachine:icestream-{job.suffix}" for job in jobs.JOBS}
CONDITIONS = {"CreateApplication": False}  # the application given as a parameter
# Two attempts of one scheduled invocation, with the context attributes as AWS's documentation shows them.
ATTEMPTS = [
    {"<aws.scheduler.execution-id>": "d32c5kddcf5bb8c3", "<aws.scheduler.attempt-number>": "1"},
    {"<aws.scheduler.execution-id>": "7e51f0c2a9b4d8e6", "<aws.scheduler.attempt-number>": "2"},
]
SCHEDULED = "2022-03-22T18:59:43Z"
HASHES = {"MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}


def _format(template: str, *values: Any) -> str:
    parts = template.split("{}")
    assert len(parts) == len(values) + 1, "States.Format: one argument per {}"
    return parts[0] + "".join(str(value) + part for value, part in zip(values, parts[1:], strict=True))


def _hash(data: str, algorithm: str) -> str:
    assert isinstance(data, str), "States.Hash takes a string"
    assert len(data) <= 10_000, "States.Hash takes at most 10,000 characters"
    return hashlib.new(HASHES[algorithm], data.encode()).hexdigest()


FUNCTIONS = {"States.Format": _format, "States.Hash": _hash}


def intrinsic(expression: str, state_input: dict, context: dict) -> Any:
    """The value of a States Language path or intrinsic call (the ones the job starters use)."""
    value, rest = _evaluate(expression, state_input, context)
    assert not rest.strip(), f"unparsed: {rest!r}"
    return value


def _evaluate(text: str, state_input: dict, context: dict) -> tuple[Any, str]:
    text = text.lstrip()
    if text.startswith("'"):
        end = text.index("'", 1)
        return text[1:end], text[end + 1 :]
    if path := re.match(r"\$\$?(?:\.\w+)+", text):
        node = context if path.group().startswith("$$") else state_input
        for key in path.group().lstrip("$.").split("."):
            node = node[key]
        return node, text[path.end() :]
    call = re.match(r"(States\.\w+)\(", text)
    assert call, f"not a path or an intrinsic: {text!r}"
    arguments, text = [], text[call.end() :]
    while True:
        value, text = _evaluate(text, state_input, context)
        arguments.append(value)
        text = text.lstrip()
        if text.startswith(")"):
            return FUNCTIONS[call.group(1)](*arguments), text[1:]
        assert text.startswith(","), text
        text = text[1:]


def parameters(node: Any, state_input: dict, context: dict) -> Any:
    """A state's ``Parameters`` as Step Functions fills them: ``Key.$`` takes the path's or intrinsic's value."""
    if isinstance(node, dict):
        return {
            key.removesuffix(".$"): intrinsic(value, state_input, context) if key.endswith(".$")
            else parameters(value, state_input, context)
            for key, value in node.items()
        }  # fmt: skip
    return [parameters(value, state_input, context) for value in node] if isinstance(node, list) else node


@pytest.fixture(scope="module")
def resources() -> dict:
    return cloudformation.template()["Resources"]


def _definition(resources: dict, schedule: str) -> dict:
    starter = resources[STARTERS[schedule].starter]["Properties"]
    return json.loads(resolve(starter["DefinitionString"], STACK, CONDITIONS))


def _schedule_arn(resources: dict, schedule: str) -> str:
    name = resolve(resources[schedule]["Properties"]["Name"], STACK)
    return f"arn:aws:scheduler:{REGION}:{ACCOUNT_ID}:schedule/default/{name}"


def _sent(resources: dict, schedule: str, attempt: dict[str, str], scheduled: str = SCHEDULED) -> dict:
    """The StartJobRun request (camelCase) one attempt of the schedule makes through its state machine."""
    target = resolve(resources[schedule]["Properties"]["Target"], STACK, CONDITIONS)
    text = target["Input"]
    fills = {
        "<aws.scheduler.schedule-arn>": _schedule_arn(resources, schedule),
        "<aws.scheduler.scheduled-time>": scheduled,
    }
    for keyword, value in {**attempt, **fills}.items():
        text = text.replace(keyword, value)
    assert target["Arn"] == STACK[STARTERS[schedule].starter]  # the schedule starts its own state machine
    (task,) = _definition(resources, schedule)["States"].values()
    execution = target["Arn"].replace(":stateMachine:", ":execution:") + ":" + attempt["<aws.scheduler.execution-id>"]
    context = {"StateMachine": {"Id": target["Arn"]}, "Execution": {"Id": execution}}
    return api_names(parameters(task["Parameters"], json.loads(text), context))


def _token_shape() -> dict:
    model = botocore.session.get_session().get_service_model("emr-serverless").operation_model("StartJobRun")
    return model.input_shape.members["clientToken"].metadata


@pytest.mark.parametrize("schedule", list(STARTERS))
def test_every_retry_of_one_scheduled_time_sends_the_same_token(resources: dict, schedule: str) -> None:
    first, retry = (_sent(resources, schedule, attempt) for attempt in ATTEMPTS)
    assert first["clientToken"] == retry["clientToken"]
    assert first == retry  # the whole request: a retry is the same start
    token = _token_shape()
    assert re.fullmatch(token["pattern"], first["clientToken"])
    assert token["min"] <= len(first["clientToken"]) <= token["max"]
    assert first["name"] == f"{STARTERS[schedule].run.name} {SCHEDULED}"


def test_other_times_and_other_jobs_get_other_tokens(resources: dict) -> None:
    tokens = {
        (schedule, scheduled): _sent(resources, schedule, ATTEMPTS[0], scheduled)["clientToken"]
        for schedule in STARTERS
        for scheduled in (SCHEDULED, "2022-03-22T19:14:43Z", "2022-03-23T18:59:43Z")
    }
    assert len(set(tokens.values())) == len(tokens) == 9
    # Another stack's ingest (another schedule) at the same time: another token.
    other = _schedule_arn(resources, "IngestSchedule").replace("/icestream-", "/icestream-prod-")
    (task,) = _definition(resources, "IngestSchedule")["States"].values()
    sent = parameters(task["Parameters"], {"schedule": other, "scheduled_time": SCHEDULED}, {})
    assert sent["ClientToken"] not in tokens.values()


def test_the_token_is_the_hash_of_the_schedule_and_the_scheduled_time(resources: dict) -> None:
    """The documented derivation, by hand: SHA-256 of ``<schedule ARN>|<scheduled time>`` in hex."""
    sent = _sent(resources, "MaintenanceSchedule", ATTEMPTS[1])
    schedule = f"arn:aws:scheduler:{REGION}:{ACCOUNT_ID}:schedule/default/icestream-maintenance"
    expected = hashlib.sha256(f"{schedule}|{SCHEDULED}".encode()).hexdigest()
    assert sent["clientToken"] == expected
    assert len(expected) == 64 == _token_shape()["max"]  # SHA-256 in hex just fits; SHA-384 or -512 would not


@pytest.mark.parametrize(
    ("schedule", "arguments", "role"),
    [
        ("IngestSchedule", ["--available-now"], STACK["IngestJobRole.Arn"]),
        ("StreamingIngestSchedule", ["--trigger", "30s"], STACK["IngestJobRole.Arn"]),
        ("MaintenanceSchedule", ["maintain"], STACK["MaintenanceJobRole.Arn"]),
    ],
)
def test_each_state_machine_sends_a_valid_start_job_run(resources: dict, schedule: str, arguments: list,
                                                        role: str) -> None:  # fmt: skip
    """The definition is JSON; its Task's request, filled in, is one botocore's EMR Serverless model accepts."""
    definition = _definition(resources, schedule)
    (task,) = definition["States"].values()
    assert definition["StartAt"] == "StartJobRun"
    assert task["End"] is True
    assert task["Resource"] == "arn:aws:states:::aws-sdk:emrserverless:startJobRun"
    assert task["TimeoutSeconds"] == jobs.START_TIMEOUT_SECONDS
    assert {error for rule in task["Retry"] for error in rule["ErrorEquals"]} == {"States.TaskFailed", "States.Timeout"}
    request = _sent(resources, schedule, ATTEMPTS[0])
    model = botocore.session.get_session().get_service_model("emr-serverless")
    validate_parameters(request, model.operation_model("StartJobRun").input_shape)
    driver = request["jobDriver"]["sparkSubmit"]
    assert driver["entryPointArguments"] == arguments
    assert driver["entryPoint"].startswith("s3://lake-bucket/artifacts/")
    assert (request["applicationId"], request["executionRoleArn"]) == ("00abc123def456", role)
    conf = dict(re.findall(r"--conf ([^=\s]+)=(\S*)", driver["sparkSubmitParameters"]))
    assert conf["spark.archives"] == "s3://lake-bucket/artifacts/icestream_env.tar.gz#icestream_env"
    for key in ("spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON", "spark.emr-serverless.driverEnv.PYSPARK_PYTHON",
                "spark.executorEnv.PYSPARK_PYTHON"):  # fmt: skip
        assert conf[key] == "./icestream_env/bin/python"
    assert conf["spark.emr-serverless.driverEnv.ICESTREAM_WAREHOUSE"] == "s3://lake-bucket/icestream"
    assert conf["spark.emr-serverless.driverEnv.ICESTREAM_SHIP"] == "none"  # icestream is inside the archive
    if schedule == "StreamingIngestSchedule":
        assert (request["mode"], request["executionTimeoutMinutes"]) == ("STREAMING", 1430)
    else:
        assert "mode" not in request
    starter = resources[STARTERS[schedule].starter]
    assert starter.get("Condition") == resources[schedule].get("Condition")  # made together, or not at all
    assert starter["Properties"]["RoleArn"] == {"Fn::GetAtt": ["JobStarterRole", "Arn"]}


def test_the_schedules_input_carries_no_attempt(resources: dict) -> None:
    """Only the schedule and the scheduled time reach the state machine: nothing that differs between attempts."""
    for schedule in STARTERS:
        state_input = json.loads(resources[schedule]["Properties"]["Target"]["Input"])
        assert state_input == {
            "schedule": "<aws.scheduler.schedule-arn>",
            "scheduled_time": "<aws.scheduler.scheduled-time>",
        }


def test_the_starter_role_starts_runs_and_passes_the_job_roles_only(resources: dict) -> None:
    role = resources["JobStarterRole"]["Properties"]
    (trust,) = resolve(role["AssumeRolePolicyDocument"], STACK)["Statement"]
    assert trust["Principal"] == {"Service": "states.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT_ID}
    assert trust["Condition"]["ArnLike"]["aws:SourceArn"] == [STACK[job.starter] for job in jobs.JOBS]
    policy = json.loads(resolve(role["Policies"][0]["PolicyDocument"], STACK, CONDITIONS))
    statements = {statement["Sid"]: statement for statement in policy["Statement"]}
    assert set(statements) == {"StartJobRuns", "PassJobRoles"}
    assert statements["StartJobRuns"]["Action"] == ["emr-serverless:StartJobRun"]
    assert statements["StartJobRuns"]["Resource"] == (
        f"arn:aws:emr-serverless:{REGION}:{ACCOUNT_ID}:/applications/00abc123def456"
    )
    assert statements["PassJobRoles"]["Resource"] == [STACK["IngestJobRole.Arn"], STACK["MaintenanceJobRole.Arn"]]
    assert statements["PassJobRoles"]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}
    }


def test_a_start_that_fails_after_its_retries_reaches_the_topic(resources: dict) -> None:
    rule = resolve(resources["FailedStartRule"]["Properties"], STACK)
    assert rule["EventPattern"] == {
        "source": ["aws.states"],
        "detail-type": ["Step Functions Execution Status Change"],
        "detail": {"status": ["FAILED", "TIMED_OUT", "ABORTED"], "stateMachineArn": [STACK[j.starter] for j in JOBS]},
    }
    assert rule["Targets"] == [{"Id": "alarm-topic", "Arn": STACK["AlarmTopic"]}]
    policy = resolve(resources["AlarmTopicPolicy"]["Properties"]["PolicyDocument"], STACK)
    (events,) = [statement for statement in policy["Statement"] if statement["Sid"] == "FailedJobRuns"]
    assert events["Condition"]["ArnEquals"]["aws:SourceArn"] == [
        STACK["FailedJobRunRule.Arn"],
        STACK["FailedStartRule.Arn"],
    ]
