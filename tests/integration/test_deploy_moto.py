"""The CloudFormation template deployed on moto's CloudFormation (moto 5.2.5, in process).

moto creates the resource types it models and skips the others with a warning; the test lists the
skipped types (``MOTO_UNSUPPORTED``), fails if moto skips anything else, and applies each skipped
resource's properties, resolved from the stack, through moto's own API for that service, so each is
at least a well-formed request. Properties moto accepts without applying are listed too
(``MOTO_IGNORED``); the template's unit tests check those instead.
"""

from __future__ import annotations

import ast
import json
import re
import warnings

import boto3
import pytest
from moto import mock_aws
from moto.cloudformation.parsing import get_model_map

from icestream.config import load_settings
from icestream.operations import deploy
from icestream.operations.security import iam_policy
from tests.helpers.cloudformation import resolve

REGION = "us-east-1"
APPLICATION = "icestream-jobs"
MOTO_UNSUPPORTED = {
    "AWS::Glue::Database": "created here with glue.create_database from the resolved DatabaseInput",
    "AWS::S3::BucketPolicy": "applied here with s3.put_bucket_policy",
    "AWS::Scheduler::Schedule": "created here with scheduler.create_schedule; its Input is sent to moto's "
    "EMR Serverless StartJobRun",
}
MOTO_IGNORED = {
    "AWS::Kinesis::Stream": ["StreamEncryption", "StreamModeDetails"],  # moto creates an unencrypted stream
    "AWS::S3::Bucket": [
        "BucketEncryption BucketKeyEnabled",  # the SSE-KMS default itself is applied
        "PublicAccessBlockConfiguration",
        "OwnershipControls",
        "LifecycleConfiguration",
    ],
}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    """moto's AWS in this process, with dummy credentials that never leave it."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # moto warns about a type it skips whenever it reads the stack (create, describe), so record them all.
    with mock_aws(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = lambda service: boto3.client(service, region_name=REGION)  # noqa: E731
        client.skipped = lambda: {
            match.group(1)
            for warning in caught
            if (match := re.search(r"Tried to parse (\S+) but it's not supported", str(warning.message)))
        }
        yield client


def _api_names(node: object) -> object:
    """A universal target's PascalCase members as the API's camelCase ones."""
    if isinstance(node, dict):
        return {key[0].lower() + key[1:]: _api_names(value) for key, value in node.items()}
    return [_api_names(value) for value in node] if isinstance(node, list) else node


def test_the_stack_deploys_on_moto(aws) -> None:
    template = deploy.template()
    types = {resource["Type"] for resource in template["Resources"].values()}
    assert types - set(get_model_map()) == set(MOTO_UNSUPPORTED), "update MOTO_UNSUPPORTED and the README"

    application = aws("emr-serverless").create_application(name=APPLICATION, releaseLabel="emr-7.5.0", type="SPARK")
    cloudformation = aws("cloudformation")
    cloudformation.create_stack(
        StackName="icestream",
        TemplateBody=deploy.render(),
        Parameters=[{"ParameterKey": "EmrServerlessApplicationId", "ParameterValue": application["applicationId"]}],
        Capabilities=["CAPABILITY_IAM"],
    )

    stack = cloudformation.describe_stacks(StackName="icestream")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}
    # moto lists a skipped resource too, without ids and as CREATE_COMPLETE: each is checked below instead.
    physical = {
        resource["LogicalResourceId"]: resource["PhysicalResourceId"]
        for resource in cloudformation.describe_stack_resources(StackName="icestream")["StackResources"]
        if "LogicalResourceId" in resource
    }
    bucket = outputs["WarehouseUri"].removeprefix("s3://").split("/")[0]
    key_arn = outputs["KeyArn"]
    account = aws("sts").get_caller_identity()["Account"]

    # The stream, the key, the bucket's SSE-KMS default encryption with a Bucket Key.
    stream = aws("kinesis").describe_stream_summary(StreamName="user-events")["StreamDescriptionSummary"]
    assert (stream["StreamStatus"], stream["OpenShardCount"]) == ("ACTIVE", 4)
    # moto keeps a CloudFormation KeyPolicy object unserialised, and DescribeKey then fails parsing it:
    # the key is checked through ListKeys, ListAliases and GetKeyRotationStatus instead.
    assert key_arn in {key["KeyArn"] for key in aws("kms").list_keys()["Keys"]}
    aliases = {alias["AliasName"]: alias.get("TargetKeyId") for alias in aws("kms").list_aliases()["Aliases"]}
    assert key_arn.endswith(f"key/{aliases['alias/icestream-icestream']}")
    assert aws("kms").get_key_rotation_status(KeyId=key_arn)["KeyRotationEnabled"]
    rule = aws("s3").get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key_arn}

    # The job role's policy, resolved by moto's CloudFormation, is the library's policy for these names.
    iam = aws("iam")
    role_policy = iam.get_role_policy(RoleName=physical["JobRole"], PolicyName="icestream")["PolicyDocument"]
    settings = load_settings(
        profile="aws",
        region=REGION,
        warehouse=outputs["WarehouseUri"],
        stream_name="user-events",
        namespace="streaming_analytics",
        kms_key_id=key_arn,
    )
    expected = iam_policy(settings, account_id=account)["Statement"]
    # moto stores a CloudFormation inline policy as the Python repr of its dictionary, not JSON.
    role_policy = ast.literal_eval(role_policy) if isinstance(role_policy, str) else role_policy
    assert [s for s in role_policy["Statement"] if s["Sid"] != "JobArtifacts"] == expected
    job_role_arn = iam.get_role(RoleName=physical["JobRole"])["Role"]["Arn"]
    scheduler_role_arn = iam.get_role(RoleName=physical["SchedulerRole"])["Role"]["Arn"]

    # What moto skipped, applied through its APIs from the stack's own values.
    values = {
        "AWS::Region": REGION,
        "AWS::AccountId": account,
        "AWS::Partition": "aws",
        "AWS::StackName": "icestream",
        "StreamName": "user-events",
        "WarehouseBucket": bucket,
        "WarehousePrefix": "icestream",
        "Namespace": "streaming_analytics",
        "ArtifactsPrefix": "artifacts",
        "DataKey.Arn": key_arn,
        "JobRole.Arn": job_role_arn,
        "EmrServerlessApplicationId": application["applicationId"],
    }
    resources = template["Resources"]
    database = resolve(resources["GlueDatabase"]["Properties"]["DatabaseInput"], values)
    database["Name"] = "streaming_analytics"  # a Ref to a parameter: its default
    aws("glue").create_database(CatalogId=account, DatabaseInput=database)
    created = aws("glue").get_database(Name="streaming_analytics")["Database"]
    assert created["LocationUri"] == f"s3://{bucket}/icestream/streaming_analytics.db"
    aws("s3").put_bucket_policy(
        Bucket=bucket,
        Policy=json.dumps(resolve(resources["WarehouseBucketPolicy"]["Properties"]["PolicyDocument"], values)),
    )
    assert json.loads(aws("s3").get_bucket_policy(Bucket=bucket)["Policy"])["Statement"][0]["Sid"] == "TlsOnly"
    for name in ("IngestSchedule", "MaintenanceSchedule"):
        properties = resources[name]["Properties"]
        request = json.loads(resolve(properties["Target"]["Input"], values))
        aws("scheduler").create_schedule(
            Name=name,
            ScheduleExpression="rate(15 minutes)",
            FlexibleTimeWindow=properties["FlexibleTimeWindow"],
            Target={"Arn": properties["Target"]["Arn"], "RoleArn": scheduler_role_arn, "Input": json.dumps(request)},
        )
        # What the schedule would send, as EMR Serverless (moto's) receives it; the token is the scheduler's.
        request["ClientToken"] = f"{name}-execution"
        run = aws("emr-serverless").start_job_run(**_api_names(request))
        assert run["applicationId"] == application["applicationId"]
    assert aws.skipped() == set(MOTO_UNSUPPORTED)
    assert {schedule["Name"] for schedule in aws("scheduler").list_schedules()["Schedules"]} == {
        "IngestSchedule",
        "MaintenanceSchedule",
    }


def test_moto_ignores_the_properties_listed(aws) -> None:
    """The listed properties really are not applied by moto (if this fails, moto learned them: check them there)."""
    cloudformation = aws("cloudformation")
    cloudformation.create_stack(StackName="icestream", TemplateBody=deploy.render(), Capabilities=["CAPABILITY_IAM"])
    summary = aws("kinesis").describe_stream_summary(StreamName="user-events")["StreamDescriptionSummary"]
    assert summary.get("EncryptionType", "NONE") == "NONE"
    assert "StreamEncryption" in MOTO_IGNORED["AWS::Kinesis::Stream"]
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in cloudformation.describe_stacks(StackName="icestream")["Stacks"][0]["Outputs"]
    }
    bucket = outputs["WarehouseUri"].removeprefix("s3://").split("/")[0]
    rule = aws("s3").get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule.get("BucketKeyEnabled", False) is False
    with pytest.raises(aws("s3").exceptions.ClientError, match="NoSuchPublicAccessBlockConfiguration"):
        aws("s3").get_public_access_block(Bucket=bucket)
    # Without an application id the schedules and their role are not created.
    logical = {
        r.get("LogicalResourceId")
        for r in cloudformation.describe_stack_resources(StackName="icestream")["StackResources"]
    }
    assert "SchedulerRole" not in logical
