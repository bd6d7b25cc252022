"""The CloudFormation template: generated from the policy source, committed unchanged, cfn-lint clean (with the
informational checks), its roles the library's policy by duty, its job runs valid EMR Serverless requests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from icestream.config import load_settings
from icestream.deploy import cloudformation
from icestream.deploy.security import duty_policy, iam_policy
from tests.helpers.cloudformation import NO_VALUE, resolve

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / cloudformation.TEMPLATE_PATH
ACCOUNT_ID, REGION = "123456789012", "eu-west-1"
KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT_ID}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/jobs"
MAINTENANCE_ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/maintenance"
# Stack values for resolving Fn::Sub the way CloudFormation would.
STACK = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT_ID,
    "AWS::Partition": "aws",
    "StreamName": "ev",
    "WarehouseBucket": "lake-bucket",
    "WarehousePrefix": "icestream",
    "Namespace": "analytics",
    "AWS::StackName": "icestream",
    "AWS::NoValue": NO_VALUE,
    "DataKey.Arn": KEY_ARN,
    "IngestJobRole.Arn": ROLE_ARN,
    "MaintenanceJobRole.Arn": MAINTENANCE_ROLE_ARN,
    "ArtifactsPrefix": "artifacts",
    "EmrServerlessApplicationId": "00abc123def456",
    "Application.ApplicationId": "00created0000",
    "StreamingTrigger": "30s",
    "StreamingTimeoutMinutes": "1430",
}
CONDITIONS = {"CreateApplication": False}  # the application given as a parameter


def test_the_committed_template_is_the_generated_one() -> None:
    assert COMMITTED.read_text() == cloudformation.render(), "run: .venv/bin/python -m icestream.deploy.cloudformation"


def test_cfn_lint_passes() -> None:
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    command = [str(cfn_lint), "--include-checks", "I", "--", str(COMMITTED)]  # I: informational (I3042: arn:aws)
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


SETTINGS = load_settings(profile="aws", region=REGION, warehouse="s3://lake-bucket/icestream", stream_name="ev",
                         namespace="analytics", kms_key_id=KEY_ARN)  # fmt: skip


def _policy(logical_id: str) -> dict:
    properties = yaml.safe_load(COMMITTED.read_text())["Resources"][logical_id]["Properties"]
    return resolve(properties["Policies"][0]["PolicyDocument"], STACK, CONDITIONS)


@pytest.mark.parametrize(("logical_id", "duty"), [("IngestJobRole", "ingest"), ("MaintenanceJobRole", "maintenance")])
def test_the_job_roles_hold_their_duty_of_the_library_policy(logical_id: str, duty: str) -> None:
    """Resolved for the same names, a job role's policy is its duty's share of ``iam_policy``, plus the entry points."""
    document = _policy(logical_id)
    library = duty_policy(iam_policy(SETTINGS, account_id=ACCOUNT_ID), duty)
    assert [s for s in document["Statement"] if s["Sid"] != "JobArtifacts"] == library["Statement"]
    artifacts = [statement for statement in document["Statement"] if statement["Sid"] == "JobArtifacts"]
    assert artifacts == [{"Sid": "JobArtifacts", "Effect": "Allow", "Action": ["s3:GetObject"],
                          "Resource": "arn:aws:s3:::lake-bucket/artifacts/*"}]  # fmt: skip
    assert "${" not in json.dumps(document)


def test_the_producer_and_operator_policies_are_the_library_policy() -> None:
    assert (
        _policy("ProducerRole")["Statement"] == duty_policy(iam_policy(SETTINGS, ACCOUNT_ID), "producer")["Statement"]
    )
    operator = yaml.safe_load(COMMITTED.read_text())["Resources"]["OperatorPolicy"]["Properties"]["PolicyDocument"]
    assert resolve(operator, STACK) == iam_policy(SETTINGS, account_id=ACCOUNT_ID)


def test_everything_at_rest_is_encrypted_with_the_stack_key_and_private() -> None:
    resources = cloudformation.template()["Resources"]
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


def test_main_writes_the_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out" / "icestream.yaml"
    assert cloudformation.main([str(target)]) == 0
    assert target.read_text() == cloudformation.render()
    assert capsys.readouterr().out.strip() == str(target)
