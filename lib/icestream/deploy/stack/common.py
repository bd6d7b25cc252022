"""Small helpers for writing CloudFormation: policy documents, ``Fn::Sub`` wrapping, parameters."""

from __future__ import annotations

from typing import Any

ARN = "arn:${AWS::Partition}"  # every ARN the stack writes is in the stack's own partition (aws, aws-cn, ...)


def document(*statements: dict[str, Any]) -> dict[str, Any]:
    """An IAM policy document of these statements."""
    return {"Version": "2012-10-17", "Statement": list(statements)}


def sub(node: Any) -> Any:
    """Wrap every string holding a ``${...}`` variable in ``Fn::Sub``."""
    if isinstance(node, dict):
        return {key: sub(value) for key, value in node.items()}
    if isinstance(node, list):
        return [sub(value) for value in node]
    return {"Fn::Sub": node} if isinstance(node, str) and "${" in node else node


def parameter(kind: str, default: Any, description: str, **more: Any) -> dict[str, Any]:
    """A template parameter."""
    return {"Type": kind, "Default": default, "Description": description, **more}


def not_empty(name: str) -> dict[str, Any]:
    """A condition: the parameter ``name`` is not empty."""
    return {"Fn::Not": [{"Fn::Equals": [{"Ref": name}, ""]}]}


def private_bucket() -> dict[str, Any]:
    """A bucket's properties for the stack's data: SSE-KMS with the stack's key and an S3 Bucket Key, no public
    access, ACLs disabled (the owner owns every object)."""
    return {
        "BucketEncryption": {
            "ServerSideEncryptionConfiguration": [
                {
                    "ServerSideEncryptionByDefault": {
                        "SSEAlgorithm": "aws:kms",
                        "KMSMasterKeyID": {"Fn::GetAtt": ["DataKey", "Arn"]},
                    },
                    "BucketKeyEnabled": True,  # one KMS call per bucket and hour, not per object
                }
            ]
        },
        "PublicAccessBlockConfiguration": {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        },
        "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
    }


def tls_only(bucket: str) -> dict[str, Any]:
    """A bucket policy that refuses every request to the bucket ``bucket`` (its logical id) not made over TLS."""
    return document(
        {
            "Sid": "TlsOnly",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [f"{ARN}:s3:::${{{bucket}}}", f"{ARN}:s3:::${{{bucket}}}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    )
