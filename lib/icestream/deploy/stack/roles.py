"""IAM roles by duty: the ingest job, the maintenance job, a producer, a reader (Athena), and a person's policy.

Each role's policy is the share of ``policies/iam-policy.json`` its duty needs (``policies/duties.json``,
:func:`icestream.deploy.security.duty_policy`), bound to the stack. The jobs' roles trust EMR
Serverless (and Glue) only from this account and its applications or jobs (``aws:SourceAccount``,
``aws:SourceArn``); the producer and reader roles trust the account, whose IAM decides who may
assume them. The operator policy (the whole file) is a managed policy to attach to the people who
set up and run the notebooks.
"""

from __future__ import annotations

import json
from typing import Any

from icestream.deploy.security import duty_policy, policy_template, substitute
from icestream.deploy.stack.common import ARN, document, sub
from icestream.deploy.stack.jobs import starter_arns
from icestream.deploy.stack.parameters import application_id

# The policy's placeholders as CloudFormation Fn::Sub variables of this template (one key for both uses).
POLICY_BINDINGS = {
    "AWS::Partition": "${AWS::Partition}",
    "AWS::Region": "${AWS::Region}",
    "AWS::AccountId": "${AWS::AccountId}",
    "StreamName": "${StreamName}",
    "WarehouseBucket": "${WarehouseBucket}",
    "WarehousePrefix": "${WarehousePrefix}",
    "Namespace": "${Namespace}",
    "StreamKeyArn": "${DataKey.Arn}",
    "WarehouseKeyArn": "${DataKey.Arn}",
}
ATHENA_WORKGROUP = "icestream-${AWS::StackName}"  # the workgroup's name (logical id AthenaWorkGroup)
ATHENA_RESULTS = "${ArtifactsPrefix}/athena-results"  # Athena's query results, in the warehouse bucket
JOB_ROLES = {"IngestJobRole": "ingest", "MaintenanceJobRole": "maintenance"}
JOB_SOURCES = [  # who may assume a job role: this account's EMR Serverless applications and Glue jobs
    f"{ARN}:emr-serverless:${{AWS::Region}}:${{AWS::AccountId}}:/applications/*",
    f"{ARN}:glue:${{AWS::Region}}:${{AWS::AccountId}}:job/*",
]


def _bound(duty: str | None) -> dict[str, Any]:
    policy = substitute(policy_template(), POLICY_BINDINGS)
    return policy if duty is None else duty_policy(policy, duty)


def artifacts_statement() -> dict[str, Any]:
    """Reading the jobs' entry points and packed environment (the platform does, for the role)."""
    return {
        "Sid": "JobArtifacts",
        "Effect": "Allow",
        "Action": ["s3:GetObject"],
        "Resource": f"{ARN}:s3:::${{WarehouseBucket}}/${{ArtifactsPrefix}}/*",
    }


def athena_statements() -> list[dict[str, Any]]:
    """What Athena needs for the reader beyond the tables: the workgroup, the catalog's listing, the results."""
    results = f"{ARN}:s3:::${{WarehouseBucket}}/{ATHENA_RESULTS}"
    glue = f"{ARN}:glue:${{AWS::Region}}:${{AWS::AccountId}}"
    return [
        {
            "Sid": "AthenaWorkGroup",
            "Effect": "Allow",
            "Action": [
                "athena:GetWorkGroup",
                "athena:StartQueryExecution",
                "athena:StopQueryExecution",
                "athena:GetQueryExecution",
                "athena:GetQueryResults",
                "athena:ListNamedQueries",
                "athena:GetNamedQuery",
                "athena:BatchGetNamedQuery",
            ],
            "Resource": f"{ARN}:athena:${{AWS::Region}}:${{AWS::AccountId}}:workgroup/{ATHENA_WORKGROUP}",
        },
        {
            "Sid": "AthenaCatalog",
            "Effect": "Allow",
            "Action": ["glue:GetDatabase", "glue:GetDatabases", "glue:GetTables"],
            "Resource": [f"{glue}:catalog", f"{glue}:database/${{Namespace}}", f"{glue}:table/${{Namespace}}/*"],
        },
        {
            "Sid": "AthenaWarehouseList",
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
            "Resource": f"{ARN}:s3:::${{WarehouseBucket}}",
        },
        {
            "Sid": "AthenaResults",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
            "Resource": f"{results}/*",
        },
        {
            "Sid": "AthenaResultsKey",
            "Effect": "Allow",
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
            "Resource": "${DataKey.Arn}",
            "Condition": {
                "StringEquals": {"kms:ViaService": "s3.${AWS::Region}.amazonaws.com"},
                "StringLike": {
                    "kms:EncryptionContext:aws:s3:arn": [f"{ARN}:s3:::${{WarehouseBucket}}", f"{results}/*"]
                },
            },
        },
    ]


def _role(description: str, trust: dict[str, Any], policy: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::IAM::Role",
        **more,
        "Properties": {
            "Description": description,
            "AssumeRolePolicyDocument": sub(trust),
            "Policies": [{"PolicyName": "icestream", "PolicyDocument": sub(policy)}],
        },
    }


def service_trust(services: str | list[str], sources: str | list[str]) -> dict[str, Any]:
    """A trust policy: these AWS services, for this account's ``sources`` (ARN patterns) only (the confused deputy)."""
    return document(
        {
            "Effect": "Allow",
            "Action": "sts:AssumeRole",
            "Principal": {"Service": services},
            "Condition": {
                "StringEquals": {"aws:SourceAccount": "${AWS::AccountId}"},
                "ArnLike": {"aws:SourceArn": sources},
            },
        }
    )


def job_trust() -> dict[str, Any]:
    """EMR Serverless and Glue, for this account's applications and jobs only."""
    return service_trust(["emr-serverless.amazonaws.com", "glue.amazonaws.com"], JOB_SOURCES)


def _account_trust() -> dict[str, Any]:
    return document(
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"AWS": f"{ARN}:iam::${{AWS::AccountId}}:root"}}
    )


def roles() -> dict[str, Any]:
    """The roles and the operator's managed policy, by logical id."""
    made: dict[str, Any] = {}
    for logical_id, duty in JOB_ROLES.items():
        policy = _bound(duty)
        policy["Statement"].append(artifacts_statement())
        made[logical_id] = _role(f"icestream {duty} job (policies/duties.json)", job_trust(), policy)
    made["ProducerRole"] = _role("icestream producer: writes the stream", _account_trust(), _bound("producer"))
    reader = _bound("reader")
    reader["Statement"] += athena_statements()
    made["ReaderRole"] = _role(
        "icestream reader: the tables, through pyiceberg, DuckDB or Athena", _account_trust(), reader
    )
    made["OperatorPolicy"] = {
        "Type": "AWS::IAM::ManagedPolicy",
        "Properties": {
            "Description": "icestream operator: setup, notebooks, ingest and maintenance by hand (iam-policy.json)",
            "PolicyDocument": sub(_bound(None)),
        },
    }
    return made


def scheduler_role() -> dict[str, Any]:
    """EventBridge Scheduler: start this stack's job starters (state machines), dead-letter failed starts."""
    schedules = f"{ARN}:scheduler:${{AWS::Region}}:${{AWS::AccountId}}:schedule/default/${{AWS::StackName}}-*"
    trust = service_trust("scheduler.amazonaws.com", schedules)
    policy = document(
        {"Sid": "StartJobStarters", "Effect": "Allow", "Action": ["states:StartExecution"], "Resource": starter_arns()},
        {"Sid": "DeadLetters", "Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": "${DeadLetterQueue.Arn}"},
        {
            "Sid": "DeadLettersKey",
            "Effect": "Allow",
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
            "Resource": "${DataKey.Arn}",
            "Condition": {"StringEquals": {"kms:ViaService": "sqs.${AWS::Region}.amazonaws.com"}},
        },
    )
    role = _role("EventBridge Scheduler: start the icestream job starters", trust, policy)
    role["Properties"]["Policies"][0]["PolicyName"] = "start-icestream-jobs"
    return role


def job_starter_role() -> dict[str, Any]:
    """Step Functions, for this stack's job starters only: start runs on the one application, pass the job roles."""
    trust = service_trust("states.amazonaws.com", starter_arns())
    policy = document(
        {
            "Sid": "StartJobRuns",
            "Effect": "Allow",
            "Action": ["emr-serverless:StartJobRun"],
            "Resource": f"{ARN}:emr-serverless:${{AWS::Region}}:${{AWS::AccountId}}:/applications/${{ApplicationId}}",
        },
        {
            "Sid": "PassJobRoles",
            "Effect": "Allow",
            "Action": ["iam:PassRole"],
            "Resource": ["${IngestJobRole.Arn}", "${MaintenanceJobRole.Arn}"],
            "Condition": {"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}},
        },
    )
    role = _role("Step Functions: the icestream job starters start job runs", trust, {})
    role["Properties"]["Policies"] = [
        {
            "PolicyName": "start-icestream-job-runs",
            "PolicyDocument": {"Fn::Sub": [_json(policy), {"ApplicationId": application_id()}]},
        }
    ]
    return role


def _json(node: Any) -> str:
    return json.dumps(node, indent=None, separators=(",", ":"))
