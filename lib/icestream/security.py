"""Least-privilege IAM policy for the ``aws`` profile, generated from the settings.

``policies/iam-policy.json`` is the template, with ``ACCOUNT_ID``, ``REGION``, ``STREAM``,
``BUCKET``, ``PREFIX``, ``NAMESPACE`` and ``KMS_KEY_ARN`` placeholders; :func:`iam_policy` fills
them in. It grants exactly what the workbook calls: the stream's own Kinesis actions (create, read,
write, reshard-free), the warehouse prefix in S3, the namespace's database and tables in Glue, and,
when a KMS key is set, encrypt/decrypt with that key through Kinesis only.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any
from urllib.parse import urlparse

from icestream.config import Settings
from icestream.errors import ConfigError

POLICY_FILE = "iam-policy.json"


def policy_template() -> dict[str, Any]:
    """The policy with its placeholders, as shipped in the package."""
    return json.loads(resources.files("icestream").joinpath("policies", POLICY_FILE).read_text())


def iam_policy(settings: Settings, account_id: str = "ACCOUNT_ID") -> dict[str, Any]:
    """The IAM policy document for these settings.

    Args:
        settings: Names the region, stream, warehouse, namespace and optional KMS key.
        account_id: The AWS account (12 digits); the placeholder is kept when not given.

    Returns:
        A policy document (``Version``, ``Statement``) ready for ``aws iam create-policy``.

    Raises:
        ConfigError: If the warehouse is not an ``s3://`` URI or the account id is malformed.
    """
    if account_id != "ACCOUNT_ID" and not (account_id.isdigit() and len(account_id) == 12):
        raise ConfigError(f"account id {account_id!r}: expected 12 digits.")
    warehouse = urlparse(settings.warehouse)
    if warehouse.scheme not in ("s3", "s3a") or not warehouse.netloc:
        raise ConfigError(f"warehouse {settings.warehouse!r}: the aws profile needs s3://bucket/prefix.")
    key = settings.kms_key_id or ""
    if key and not key.startswith("arn:"):
        # A key id or an alias name: the policy needs an ARN.
        key = key if key.startswith("alias/") else f"key/{key}"
        key = f"arn:aws:kms:{settings.region}:{account_id}:{key}"
    values = {
        "ACCOUNT_ID": account_id,
        "REGION": settings.region,
        "STREAM": settings.stream_name,
        "BUCKET": warehouse.netloc,
        "PREFIX": warehouse.path.strip("/") or "*",
        "NAMESPACE": settings.namespace,
        "KMS_KEY_ARN": key,
    }
    policy = policy_template()
    statements = [statement for statement in policy["Statement"] if key or statement["Sid"] != "KmsForStream"]
    text = json.dumps({**policy, "Statement": statements})
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return json.loads(text)
