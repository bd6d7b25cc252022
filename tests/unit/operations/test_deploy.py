"""The CloudFormation template: generated from the policy source, committed unchanged, and cfn-lint clean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import botocore.session
import pytest
import yaml
from botocore.validate import validate_parameters

from icestream.config import load_settings
from icestream.operations import deploy
from icestream.operations.security import iam_policy
from tests.helpers.cloudformation import resolve

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / deploy.TEMPLATE_PATH
ACCOUNT_ID, REGION = "123456789012", "eu-west-1"
KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT_ID}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/jobs"
# Stack values for resolving Fn::Sub the way CloudFormation would.
STACK = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT_ID,
    "AWS::Partition": "aws",
    "StreamName": "ev",
    "WarehouseBucket": "lake-bucket",
    "WarehousePrefix": "icestream",
    "Namespace": "analytics",
    "DataKey.Arn": KEY_ARN,
    "JobRole.Arn": ROLE_ARN,
    "ArtifactsPrefix": "artifacts",
    "EmrServerlessApplicationId": "00abc123def456",
}


def test_the_committed_template_is_the_generated_one() -> None:
    assert COMMITTED.read_text() == deploy.render(), "run: .venv/bin/python -m icestream.operations.deploy"


def test_cfn_lint_passes() -> None:
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run([str(cfn_lint), str(COMMITTED)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_role_policy_is_the_library_policy() -> None:
    """Resolved for the same names, the stack's role policy is what ``iam_policy`` prints, plus the entry points."""
    role = yaml.safe_load(COMMITTED.read_text())["Resources"]["JobRole"]["Properties"]
    document = resolve(role["Policies"][0]["PolicyDocument"], STACK)
    settings = load_settings(
        profile="aws",
        region=REGION,
        warehouse="s3://lake-bucket/icestream",
        stream_name="ev",
        namespace="analytics",
        kms_key_id=KEY_ARN,
    )
    library = iam_policy(settings, account_id=ACCOUNT_ID)
    artifacts = [statement for statement in document["Statement"] if statement["Sid"] == "JobArtifacts"]
    assert [s for s in document["Statement"] if s["Sid"] != "JobArtifacts"] == library["Statement"]
    assert artifacts == [
        {
            "Sid": "JobArtifacts",
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": "arn:aws:s3:::lake-bucket/artifacts/*",
        }
    ]
    assert "${" not in json.dumps(document)


def test_everything_at_rest_is_encrypted_with_the_stack_key_and_private() -> None:
    resources = deploy.template()["Resources"]
    key = {"Fn::GetAtt": ["DataKey", "Arn"]}
    assert resources["Stream"]["Properties"]["StreamEncryption"] == {"EncryptionType": "KMS", "KeyId": key}
    bucket = resources["WarehouseBucket"]["Properties"]
    rule = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key}
    assert rule["BucketKeyEnabled"] is True
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    assert resources["WarehouseBucket"]["DeletionPolicy"] == "Retain"  # the tables outlive the stack
    assert not any("Expiration" in str(rule) for rule in bucket["LifecycleConfiguration"]["Rules"])
    assert resources["DataKey"]["Properties"]["EnableKeyRotation"] is True


@pytest.mark.parametrize(
    ("schedule", "arguments"), [("IngestSchedule", ["--available-now"]), ("MaintenanceSchedule", ["maintain"])]
)
def test_schedules_send_a_valid_start_job_run(schedule: str, arguments: list[str]) -> None:
    """The schedule's Input, resolved, is a request botocore's EMR Serverless model accepts."""
    target = deploy.template()["Resources"][schedule]["Properties"]["Target"]
    assert target["Arn"] == "arn:aws:scheduler:::aws-sdk:emrserverless:startJobRun"
    request = json.loads(resolve(target["Input"], STACK))

    def api_names(node: object) -> object:  # universal targets take the API's members in PascalCase
        if isinstance(node, dict):
            return {key[0].lower() + key[1:]: api_names(value) for key, value in node.items()}
        return [api_names(value) for value in node] if isinstance(node, list) else node

    model = botocore.session.get_session().get_service_model("emr-serverless")
    validate_parameters(api_names(request), model.operation_model("StartJobRun").input_shape)
    driver = request["JobDriver"]["SparkSubmit"]
    assert driver["EntryPointArguments"] == arguments
    assert driver["EntryPoint"].startswith("s3://lake-bucket/artifacts/")
    assert request["ExecutionRoleArn"] == ROLE_ARN
    assert (
        "spark.emr-serverless.driverEnv.ICESTREAM_WAREHOUSE=s3://lake-bucket/icestream"
        in (driver["SparkSubmitParameters"])
    )


def test_the_scheduler_may_pass_only_the_job_role_to_emr_serverless() -> None:
    role = resolve(deploy.template()["Resources"]["SchedulerRole"]["Properties"], STACK)
    statements = {statement["Sid"]: statement for statement in role["Policies"][0]["PolicyDocument"]["Statement"]}
    assert statements["PassJobRole"]["Resource"] == ROLE_ARN
    assert statements["PassJobRole"]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}
    }
    assert statements["StartJobRuns"]["Resource"].endswith(":/applications/00abc123def456")


def test_main_writes_the_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out" / "icestream.yaml"
    assert deploy.main([str(target)]) == 0
    assert target.read_text() == deploy.render()
    assert capsys.readouterr().out.strip() == str(target)
