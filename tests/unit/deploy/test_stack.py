"""The stack's parts: partition-neutral ARNs, retained state, network, roles' trust, failures visible.

Each request-shaped property (the scheduler's target input, the printed ``start-job-run`` lines) is
checked against botocore's service model; the rest against what AWS documents for the property.
"""

from __future__ import annotations

import json
import re
import shlex

import botocore.session
import pytest
from botocore.validate import validate_parameters

from icestream.cli import build_parser
from icestream.deploy import cloudformation
from icestream.deploy.stack import jobs
from icestream.deploy.stack.jobs import api_names
from icestream.errors import ConfigError
from tests.helpers.cloudformation import NO_VALUE, resolve

ACCOUNT_ID = "123456789012"
STACK = {
    "AWS::Region": "cn-north-1",
    "AWS::AccountId": ACCOUNT_ID,
    "AWS::Partition": "aws-cn",
    "AWS::StackName": "icestream",
    "AWS::NoValue": NO_VALUE,
    "StreamName": "ev",
    "Stream": "ev",
    "WarehouseBucket": "lake-bucket",
    "WarehousePrefix": "icestream",
    "Namespace": "analytics",
    "ArtifactsPrefix": "artifacts",
    "EmrServerlessApplicationId": "",
    "Application.ApplicationId": "00created0000",
    "DataKey.Arn": f"arn:aws-cn:kms:cn-north-1:{ACCOUNT_ID}:key/k",
    "IngestJobRole.Arn": f"arn:aws-cn:iam::{ACCOUNT_ID}:role/ingest",
    "MaintenanceJobRole.Arn": f"arn:aws-cn:iam::{ACCOUNT_ID}:role/maintenance",
    "DeadLetterQueue.Arn": f"arn:aws-cn:sqs:cn-north-1:{ACCOUNT_ID}:dlq",
    "FailedJobRunRule.Arn": f"arn:aws-cn:events:cn-north-1:{ACCOUNT_ID}:rule/failed",
    "FailedStartRule.Arn": f"arn:aws-cn:events:cn-north-1:{ACCOUNT_ID}:rule/failed-starts",
    "AlarmTopic": f"arn:aws-cn:sns:cn-north-1:{ACCOUNT_ID}:alarms",
    "StreamingTrigger": "30s",
    "StreamingTimeoutMinutes": "1430",
}
STACK |= {job.starter: f"arn:aws-cn:states:cn-north-1:{ACCOUNT_ID}:stateMachine:icestream-{job.suffix}"
          for job in jobs.JOBS}  # fmt: skip
CONDITIONS = {"CreateApplication": True}
SCHEDULES = ("IngestSchedule", "StreamingIngestSchedule", "MaintenanceSchedule")


@pytest.fixture(scope="module")
def resources() -> dict:
    return cloudformation.template()["Resources"]


def test_no_arn_names_a_partition() -> None:
    """Every ARN is written with ${AWS::Partition} (aws-cn, aws-us-gov), the state machines' tasks too."""
    assert re.findall(r"arn:aws[-a-z]*:", cloudformation.render()) == []
    resources = cloudformation.template()["Resources"]
    for job in jobs.JOBS:
        assert resolve(resources[job.logical_id]["Properties"]["Target"]["Arn"], STACK) == STACK[job.starter]
        definition = json.loads(resolve(resources[job.starter]["Properties"]["DefinitionString"], STACK, CONDITIONS))
        (task,) = definition["States"].values()
        assert task["Resource"] == "arn:aws-cn:states:::aws-sdk:emrserverless:startJobRun"


@pytest.mark.parametrize("logical_id", ["Stream", "GlueDatabase", "WarehouseBucket", "DataKey"])
def test_state_outlives_the_stack(resources: dict, logical_id: str) -> None:
    assert (resources[logical_id]["DeletionPolicy"], resources[logical_id]["UpdateReplacePolicy"]) == (
        "Retain",
        "Retain",
    )


def test_the_jobs_network(resources: dict) -> None:
    kinesis = resources["KinesisEndpoint"]["Properties"]
    assert (kinesis["VpcEndpointType"], kinesis["PrivateDnsEnabled"]) == ("Interface", True)
    assert resolve(kinesis["ServiceName"], STACK) == "com.amazonaws.cn-north-1.kinesis-streams"
    s3 = resources["S3Endpoint"]
    assert (s3["Condition"], s3["Properties"]["VpcEndpointType"]) == ("HasGatewayEndpoint", "Gateway")
    assert resolve(s3["Properties"]["ServiceName"], STACK) == "com.amazonaws.cn-north-1.s3"
    application = resources["Application"]
    assert application["Condition"] == "CreateApplication"
    network = application["Properties"]["NetworkConfiguration"]
    assert network == {"SubnetIds": {"Ref": "PrivateSubnetIds"}, "SecurityGroupIds": [{"Ref": "JobSecurityGroup"}]}
    assert cloudformation.template()["Parameters"]["ReleaseLabel"]["Default"] == "emr-7.12.0"  # Iceberg 1.10.0
    # The endpoint admits the jobs' group only.
    ingress = resources["EndpointSecurityGroup"]["Properties"]["SecurityGroupIngress"]
    assert [rule["SourceSecurityGroupId"] for rule in ingress] == [{"Ref": "JobSecurityGroup"}]
    model = botocore.session.get_session().get_service_model("emr-serverless")
    shape = model.operation_model("CreateApplication").input_shape.members["networkConfiguration"]
    given = {"PrivateSubnetIds": ["subnet-0a1b2c3d"], "JobSecurityGroup": "sg-0a1b2c3d"}
    validate_parameters(api_names(resolve(network, given)), shape)


@pytest.mark.parametrize("logical_id", ["IngestJobRole", "MaintenanceJobRole"])
def test_job_roles_trust_this_accounts_services_only(resources: dict, logical_id: str) -> None:
    trust = resolve(resources[logical_id]["Properties"]["AssumeRolePolicyDocument"], STACK)
    (statement,) = trust["Statement"]
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT_ID}
    assert statement["Condition"]["ArnLike"]["aws:SourceArn"] == [
        f"arn:aws-cn:emr-serverless:cn-north-1:{ACCOUNT_ID}:/applications/*",
        f"arn:aws-cn:glue:cn-north-1:{ACCOUNT_ID}:job/*",
    ]


def test_the_scheduler_starts_only_these_state_machines(resources: dict) -> None:
    """The scheduler starts the job starters and dead-letters; it starts no job run and passes no role itself."""
    role = resources["SchedulerRole"]["Properties"]
    trust = resolve(role["AssumeRolePolicyDocument"], STACK)["Statement"][0]["Condition"]
    assert (
        trust["ArnLike"]["aws:SourceArn"]
        == f"arn:aws-cn:scheduler:cn-north-1:{ACCOUNT_ID}:schedule/default/icestream-*"
    )
    policy = resolve(role["Policies"][0]["PolicyDocument"], STACK, CONDITIONS)
    statements = {statement["Sid"]: statement for statement in policy["Statement"]}
    assert set(statements) == {"StartJobStarters", "DeadLetters", "DeadLettersKey"}
    assert statements["StartJobStarters"]["Action"] == ["states:StartExecution"]
    assert statements["StartJobStarters"]["Resource"] == [STACK[job.starter] for job in jobs.JOBS]
    assert statements["DeadLetters"]["Resource"] == STACK["DeadLetterQueue.Arn"]
    for name in SCHEDULES:  # the schedules' names are what the trust condition admits
        assert resolve(resources[name]["Properties"]["Name"], STACK).startswith("icestream-")
    for job in jobs.JOBS:  # the state machines' names are what the policy names
        name = resolve(resources[job.starter]["Properties"]["StateMachineName"], STACK)
        assert STACK[job.starter].endswith(f":stateMachine:{name}")


def test_the_reader_can_use_athena_and_decrypt(resources: dict) -> None:
    policy = resolve(resources["ReaderRole"]["Properties"]["Policies"][0]["PolicyDocument"], STACK)
    statements = {statement["Sid"]: statement for statement in policy["Statement"]}
    assert statements["AthenaWorkGroup"]["Resource"] == (
        f"arn:aws-cn:athena:cn-north-1:{ACCOUNT_ID}:workgroup/icestream-icestream"
    )
    assert "athena:StartQueryExecution" in statements["AthenaWorkGroup"]["Action"]
    assert statements["AthenaResults"]["Resource"] == "arn:aws-cn:s3:::lake-bucket/artifacts/athena-results/*"
    assert statements["KmsForWarehouse"]["Action"] == ["kms:Decrypt"]
    assert set(statements["AthenaResultsKey"]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert "s3:PutObject" not in statements["WarehouseObjects"]["Action"]  # the tables are read only


def test_every_schedule_dead_letters_to_an_encrypted_queue(resources: dict) -> None:
    queue = resources["DeadLetterQueue"]["Properties"]
    assert queue["KmsMasterKeyId"] == {"Fn::GetAtt": ["DataKey", "Arn"]}
    scheduler = botocore.session.get_session().get_service_model("scheduler")
    for name in SCHEDULES:
        target = resolve(resources[name]["Properties"]["Target"], {**STACK, "SchedulerRole.Arn": "arn:r"}, CONDITIONS)
        assert (
            target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}}
            or target["DeadLetterConfig"]["Arn"] == STACK["DeadLetterQueue.Arn"]
        )
        validate_parameters(
            {
                "Name": name,
                "ScheduleExpression": "rate(15 minutes)",
                "FlexibleTimeWindow": {"Mode": "OFF"},
                "Target": target,
            },
            scheduler.operation_model("CreateSchedule").input_shape,
        )


def test_failed_runs_and_a_lagging_ingest_alarm(resources: dict) -> None:
    rule = resolve(resources["FailedJobRunRule"]["Properties"], STACK, CONDITIONS)
    assert rule["EventPattern"] == {
        "source": ["aws.emr-serverless"],
        "detail-type": ["EMR Serverless Job Run State Change"],
        "detail": {"state": ["FAILED"], "applicationId": ["00created0000"]},
    }
    assert rule["Targets"][0]["Arn"] == {"Ref": "AlarmTopic"} or rule["Targets"][0]["Arn"] == STACK["AlarmTopic"]
    lag = resources["IteratorAgeAlarm"]["Properties"]
    assert (lag["Namespace"], lag["MetricName"]) == ("AWS/Kinesis", "GetRecords.IteratorAgeMilliseconds")
    assert lag["Threshold"] == {"Ref": "IteratorAgeAlarmMilliseconds"}
    assert resources["AlarmTopic"]["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": ["DataKey", "Arn"]}
    assert resources["AlarmSubscription"]["Condition"] == "HasAlarmEmail"


def test_the_printed_commands_are_valid_requests() -> None:
    """The outputs' start-job-run lines parse as the CLI would read them and validate against botocore."""
    values = {**STACK, "OperatorPolicy": "arn:p", "Stream.Arn": "arn:s", "DataKey": "k", "DeadLetterQueue": "q"}
    values |= {f"{role}.Arn": "arn:r" for role in ("ProducerRole", "ReaderRole")}
    values |= {"DeliveryStream": "icestream-iceberg", "PublisherFunction": "icestream-publish_events"}
    outputs = resolve(cloudformation.template()["Outputs"], values, CONDITIONS)
    # The test publisher's line: a valid Invoke of the stack's function with a payload its handler reads.
    words = shlex.split(outputs["PublishTestEventsCommand"]["Value"])
    assert words[:3] == ["aws", "lambda", "invoke"]
    invoke = {"FunctionName": words[words.index("--function-name") + 1], "Payload": words[words.index("--payload") + 1]}
    lambda_model = botocore.session.get_session().get_service_model("lambda").operation_model("Invoke")
    validate_parameters(invoke, lambda_model.input_shape)
    assert invoke["FunctionName"] == "icestream-publish_events"
    assert json.loads(invoke["Payload"]) == {"count": 100}
    model = botocore.session.get_session().get_service_model("emr-serverless").operation_model("StartJobRun")
    for name in ("StartIngestCommand", "StartMaintenanceCommand"):
        words = shlex.split(outputs[name]["Value"])
        assert words[:3] == ["aws", "emr-serverless", "start-job-run"]
        request = json.loads(words[words.index("--cli-input-json") + 1])
        # The CLI fills an idempotency token itself (botocore: members marked idempotencyToken).
        tokens = [name for name, member in model.input_shape.members.items() if member.metadata.get("idempotencyToken")]
        assert tokens == ["clientToken"]
        assert "clientToken" not in request
        validate_parameters({**request, "clientToken": "cli-made"}, model.input_shape)
        assert request["applicationId"] == "00created0000"
    # The upload is icestream ship's (stamped entry points, packed environment): a command it accepts.
    describe, ship = (shlex.split(part) for part in outputs["UploadCommand"]["Value"].split(" && "))
    assert describe[:4] == ["aws", "cloudformation", "describe-stacks", "--stack-name"]
    assert ship[0] == "icestream"
    parsed = build_parser().parse_args(ship[1:])
    assert (parsed.command, parsed.target, parsed.stack_json) == ("ship", "emr-serverless", describe[-1].split()[-1])


def test_extra_resources_are_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The place for optional parts (the Athena workgroup): a maker's resources join the template."""
    monkeypatch.setattr(cloudformation, "EXTRA_RESOURCES", [lambda: {"Extra": {"Type": "AWS::SNS::Topic"}}])
    assert cloudformation.template()["Resources"]["Extra"] == {"Type": "AWS::SNS::Topic"}


def test_a_deployed_stacks_run_request_is_ready_to_send() -> None:
    """``start_job_run_request``: the run with the stack's values, a valid StartJobRun (the CLI fills the token)."""
    values = {**STACK, "ApplicationId": "00abc123def456"}
    request = jobs.start_job_run_request("ingest.py", ["--available-now"], "icestream-ingest", values)
    model = botocore.session.get_session().get_service_model("emr-serverless").operation_model("StartJobRun")
    validate_parameters({**request, "clientToken": "t"}, model.input_shape)
    assert request["executionRoleArn"] == STACK["IngestJobRole.Arn"]
    assert "${" not in json.dumps(request)
    with pytest.raises(ConfigError, match="ApplicationId"):
        jobs.start_job_run_request("ingest.py", [], "x", STACK)
