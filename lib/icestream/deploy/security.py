"""Least-privilege IAM policy for the ``aws`` profile, and what each thing the workbook does needs.

``policies/iam-policy.json`` is the one policy source. Its placeholders are CloudFormation ``Fn::Sub``
variables (``${AWS::Partition}``, ``${AWS::Region}``, ``${AWS::AccountId}``, ``${StreamName}``, ``${WarehouseBucket}``,
``${WarehousePrefix}``, ``${Namespace}``, ``${StreamKeyArn}``, ``${WarehouseKeyArn}``), so the same
file becomes the policy :func:`iam_policy` prints for a settings object and the role policy of the
CloudFormation template (:mod:`icestream.deploy.cloudformation`). It grants the stream's own Kinesis actions, the
warehouse prefix in S3, the namespace's database and tables in Glue, and use of the KMS keys only
through Kinesis and S3 (``kms:ViaService``).

The tables below say which actions each kind of statement, Iceberg procedure, pyiceberg catalog call
and Kinesis call needs
through Iceberg's ``GlueCatalog`` and ``S3FileIO`` (what their code calls: ``glue:GetTable`` to load
a table, ``glue:UpdateTable`` to commit a new ``metadata_location``, ``glue:DeleteTable`` for
``DROP TABLE``, S3 object reads and writes of metadata and data files, ``ListObjectsV2`` for orphan
removal). ``tests/unit/deploy/test_security.py`` scans the package and the notebooks for what they run,
maps it through these tables and fails when the policy misses one action, or grants one nothing needs.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any
from urllib.parse import urlparse

from icestream.config import Settings
from icestream.errors import ConfigError

POLICY_FILE = "iam-policy.json"
DUTIES_FILE = "duties.json"  # each role's share of the policy, and the code it runs
PLACEHOLDER = re.compile(r"\$\{([A-Za-z:]+)\}")
# Regions outside the ``aws`` partition, by prefix (AWS: "Identify AWS resources with Amazon Resource Names").
PARTITIONS = {"cn-": "aws-cn", "us-gov-": "aws-us-gov", "us-iso-": "aws-iso", "us-isob-": "aws-iso-b"}

# What an action acts on; tests/unit/deploy/test_security.py turns each into the ARN the call names.
STREAM, ACCOUNT, BUCKET, OBJECTS = "stream", "account", "bucket", "objects"
CATALOG_DATABASE, CATALOG_TABLE = "database", "table"  # Glue checks the catalog, database (and table) ARNs
STREAM_KEY, WAREHOUSE_KEY = "stream-key", "warehouse-key"
Grant = tuple[str, str]  # (IAM action, what it acts on)

# Kinds of SQL statement, recognised in the SQL text a module or notebook runs (first match wins).
STATEMENT_KINDS: dict[str, str] = {
    "drop table purge": r"\bDROP\s+TABLE\b[^;]*?\bPURGE\b",
    "drop table": r"\bDROP\s+TABLE\b",
    "rename table": r"\bALTER\s+TABLE\b[^;]*?\bRENAME\s+TO\b",
    "alter table": r"\bALTER\s+TABLE\b",
    "create namespace": r"\bCREATE\s+(?:NAMESPACE|DATABASE|SCHEMA)\b",
    "drop namespace": r"\bDROP\s+(?:NAMESPACE|DATABASE|SCHEMA)\b",
    "create table": r"\b(?:CREATE(?:\s+OR\s+REPLACE)?|REPLACE)\s+TABLE\b",
    "write": r"\b(?:INSERT\s+(?:INTO|OVERWRITE)|MERGE\s+INTO|DELETE\s+FROM|UPDATE\s+\S+\s+SET)\b",
    "list tables": r"\bSHOW\s+TABLES\b",
    "list namespaces": r"\bSHOW\s+(?:NAMESPACES|DATABASES)\b",
    "read": r"\b(?:SELECT|DESCRIBE|SHOW\s+(?:TBLPROPERTIES|CREATE\s+TABLE|COLUMNS))\b",
}

_READ: tuple[Grant, ...] = (
    ("glue:GetTable", CATALOG_TABLE),  # GlueTableOperations.doRefresh: the current metadata_location
    ("s3:GetObject", OBJECTS),  # metadata.json, manifest lists, manifests, data files
    ("kms:Decrypt", WAREHOUSE_KEY),  # reading an SSE-KMS object
)
_COMMIT: tuple[Grant, ...] = (
    *_READ,
    ("s3:PutObject", OBJECTS),  # new data, manifests and metadata.json (multipart uploads too)
    ("s3:AbortMultipartUpload", OBJECTS),  # S3FileIO aborts a failed multipart upload
    ("kms:GenerateDataKey", WAREHOUSE_KEY),  # writing an SSE-KMS object
    ("glue:UpdateTable", CATALOG_TABLE),  # the commit: swap metadata_location (optimistic, by VersionId)
)
_DELETE: tuple[Grant, ...] = (("s3:DeleteObject", OBJECTS),)

KIND_GRANTS: dict[str, tuple[Grant, ...]] = {
    "read": _READ,
    "write": _COMMIT,
    "alter table": _COMMIT,
    "create namespace": (("glue:GetDatabase", CATALOG_DATABASE), ("glue:CreateDatabase", CATALOG_DATABASE)),
    # defaultWarehouseLocation reads the database; the first commit creates the Glue table.
    "create table": (*_COMMIT, ("glue:GetDatabase", CATALOG_DATABASE), ("glue:CreateTable", CATALOG_TABLE)),
    "drop table": (("glue:GetTable", CATALOG_TABLE), ("glue:DeleteTable", CATALOG_TABLE)),
    # PURGE reads the last metadata, deletes the Glue table, then every file it references.
    "drop table purge": (*_READ, ("glue:DeleteTable", CATALOG_TABLE), *_DELETE),
    # Glue has no rename: GlueCatalog.renameTable creates the new table and deletes the old one.
    "rename table": (
        *_READ,
        ("glue:GetDatabase", CATALOG_DATABASE),
        ("glue:CreateTable", CATALOG_TABLE),
        ("glue:DeleteTable", CATALOG_TABLE),
    ),
    "drop namespace": (
        ("glue:GetDatabase", CATALOG_DATABASE),
        ("glue:GetTables", CATALOG_DATABASE),
        ("glue:DeleteDatabase", CATALOG_DATABASE),
    ),
    "list tables": (("glue:GetDatabase", CATALOG_DATABASE), ("glue:GetTables", CATALOG_DATABASE)),
    "list namespaces": (("glue:GetDatabases", CATALOG_DATABASE),),
    # DataFrameWriterV2 (``writeTo(...).append()``): a commit like INSERT INTO.
    "dataframe write": _COMMIT,
}

# Iceberg's Spark procedures (``CALL <catalog>.system.<name>``).
PROCEDURE_GRANTS: dict[str, tuple[Grant, ...]] = {
    "rewrite_data_files": _COMMIT,
    "rewrite_manifests": _COMMIT,
    "rewrite_position_delete_files": _COMMIT,
    "rollback_to_snapshot": _COMMIT,
    "rollback_to_timestamp": _COMMIT,
    "set_current_snapshot": _COMMIT,
    "cherrypick_snapshot": _COMMIT,
    "fast_forward": _COMMIT,
    "expire_snapshots": (*_COMMIT, *_DELETE),  # deletes files only expired snapshots referenced
    # Lists the table's location (S3FileIO.listPrefix: ListObjectsV2, i.e. s3:ListBucket), then deletes.
    "remove_orphan_files": (*_READ, ("s3:ListBucket", BUCKET), *_DELETE),
    "register_table": (*_READ, ("glue:GetDatabase", CATALOG_DATABASE), ("glue:CreateTable", CATALOG_TABLE)),
    "create_changelog_view": _READ,  # reads the snapshots' data files; the view is the session's own
}

# pyiceberg's Catalog methods (its GlueCatalog calls the same Glue operations as Iceberg's Java one).
PYICEBERG_CATALOG_GRANTS: dict[str, tuple[Grant, ...]] = {
    "load_table": _READ,
    "table_exists": (("glue:GetTable", CATALOG_TABLE),),
    "create_table": KIND_GRANTS["create table"],
    "create_table_if_not_exists": KIND_GRANTS["create table"],
    "register_table": PROCEDURE_GRANTS["register_table"],
    "drop_table": KIND_GRANTS["drop table"],
    "purge_table": KIND_GRANTS["drop table purge"],
    "rename_table": KIND_GRANTS["rename table"],
    "create_namespace": KIND_GRANTS["create namespace"],
    "load_namespace_properties": (("glue:GetDatabase", CATALOG_DATABASE),),
    "list_tables": KIND_GRANTS["list tables"],
    "list_namespaces": KIND_GRANTS["list namespaces"],
}

# Kinesis calls on an encrypted stream also use its key (AWS: "Permissions to use user-generated KMS keys").
KINESIS_KEY_USE: dict[str, str] = {
    "PutRecords": "kms:GenerateDataKey",
    "PutRecord": "kms:GenerateDataKey",
    "GetRecords": "kms:Decrypt",
}
KINESIS_ACCOUNT_ACTIONS = frozenset({"ListStreams"})  # AWS allows only Resource "*" for these


# Glue and S3 calls the code makes itself (besides Iceberg's): what each names, by IAM action.
GLUE_TARGETS: dict[str, str] = {
    "GetTable": CATALOG_TABLE,
    "UpdateTable": CATALOG_TABLE,
    "CreateTable": CATALOG_TABLE,
    "DeleteTable": CATALOG_TABLE,
    "GetDatabase": CATALOG_DATABASE,
    "GetDatabases": CATALOG_DATABASE,
    "GetTables": CATALOG_DATABASE,
    "CreateDatabase": CATALOG_DATABASE,
}
S3_ACTIONS: dict[str, Grant] = {  # API operation -> (IAM action, target): IAM names some differently
    "GetObject": ("s3:GetObject", OBJECTS),
    "PutObject": ("s3:PutObject", OBJECTS),
    "DeleteObject": ("s3:DeleteObject", OBJECTS),
    "ListObjectsV2": ("s3:ListBucket", BUCKET),
    "ListBuckets": ("s3:ListAllMyBuckets", ACCOUNT),
    "CreateBucket": ("s3:CreateBucket", BUCKET),
}
API_SERVICES = frozenset({"kinesis", "glue", "s3"})  # the services whose client calls map to IAM grants here


def api_grants(service: str, operation: str, encrypted: bool) -> set[Grant]:
    """What a client call the code makes itself needs (``kinesis``, ``glue`` or ``s3``; boto3's API names).

    Raises:
        ConfigError: If the call is not mapped yet (add it to the tables above).
    """
    if service == "kinesis":
        return kinesis_grants(operation, encrypted)
    if service == "glue" and operation in GLUE_TARGETS:
        return {(f"glue:{operation}", GLUE_TARGETS[operation])}
    if service == "s3" and operation in S3_ACTIONS:
        return {S3_ACTIONS[operation]}
    raise ConfigError(f"{service}:{operation} is not mapped to IAM grants: add it to icestream.deploy.security.")


def statement_kinds(sql: str) -> set[str]:
    """The kinds of statement in ``sql`` (keys of :data:`STATEMENT_KINDS`), one per statement text."""
    for kind, pattern in STATEMENT_KINDS.items():
        if re.search(pattern, sql, flags=re.IGNORECASE):
            return {kind}
    return set()


def kinesis_grants(operation: str, encrypted: bool) -> set[Grant]:
    """What a Kinesis API call (``PutRecords``...) needs, on the stream and its key."""
    grants = {(f"kinesis:{operation}", ACCOUNT if operation in KINESIS_ACCOUNT_ACTIONS else STREAM)}
    if encrypted and operation in KINESIS_KEY_USE:
        grants.add((KINESIS_KEY_USE[operation], STREAM_KEY))
    return grants


def policy_template() -> dict[str, Any]:
    """The policy with its ``${...}`` placeholders, as shipped in the package."""
    return json.loads(resources.files("icestream.deploy").joinpath("policies", POLICY_FILE).read_text())


def partition(region: str) -> str:
    """The ARN partition of a region (``aws``, ``aws-cn``, ``aws-us-gov``...)."""
    prefixes = sorted(PARTITIONS, key=len, reverse=True)  # us-isob- before us-iso-
    return next((PARTITIONS[prefix] for prefix in prefixes if region.startswith(prefix)), "aws")


def duties() -> dict[str, Any]:
    """Each duty (``ingest``, ``maintenance``, ``producer``, ``reader``): its code and its actions by statement."""
    return json.loads(resources.files("icestream.deploy").joinpath("policies", DUTIES_FILE).read_text())


def duty_policy(policy: dict[str, Any], duty: str) -> dict[str, Any]:
    """The statements of ``policy`` a duty needs, each cut to the duty's actions.

    Args:
        policy: The whole policy (:func:`policy_template` or :func:`iam_policy`'s answer).
        duty: A key of :func:`duties`.

    Returns:
        A policy document of the same statements (same resources and conditions), fewer actions.
    """
    wanted = duties()[duty]["statements"]
    statements = [
        {**statement, "Action": [action for action in statement["Action"] if action in wanted[statement["Sid"]]]}
        for statement in policy["Statement"]
        if statement["Sid"] in wanted
    ]
    return {**policy, "Statement": statements}


def key_arn(key: str, region: str, account_id: str) -> str:
    """A KMS key ARN from a key ARN, a key id or an ``alias/...`` name."""
    if key.startswith("arn:"):
        return key
    return f"arn:{partition(region)}:kms:{region}:{account_id}:{key if key.startswith('alias/') else f'key/{key}'}"


def substitute(policy: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """Replace every ``${Name}`` in the policy's strings by ``values[Name]``, in one pass.

    Raises:
        ConfigError: If a placeholder has no value (the policy file and the caller disagree).
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise ConfigError(
                f"IAM policy placeholder ${{{match.group(1)}}} has no value: update icestream.deploy.security."
            )
        return values[match.group(1)]

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [walk(value) for value in node]
        return PLACEHOLDER.sub(replace, node) if isinstance(node, str) else node

    return walk(policy)


def iam_policy(
    settings: Settings, account_id: str = "ACCOUNT_ID", warehouse_kms_key_id: str | None = None
) -> dict[str, Any]:
    """The IAM policy document for these settings.

    Args:
        settings: Names the region, stream, warehouse, namespace and optional stream KMS key.
        account_id: The AWS account (12 digits); the placeholder is kept when not given.
        warehouse_kms_key_id: The warehouse bucket's SSE-KMS key (ARN, id or alias); ``None``: the
            stream's key (the CloudFormation template encrypts both with one key); ``""``: none
            (an SSE-S3 bucket).

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
    stream_key = settings.kms_key_id or ""
    warehouse_key = stream_key if warehouse_kms_key_id is None else warehouse_kms_key_id
    keys = {"StreamKeyArn": stream_key, "WarehouseKeyArn": warehouse_key}
    values = {
        "AWS::Partition": partition(settings.region),
        "AWS::AccountId": account_id,
        "AWS::Region": settings.region,
        "StreamName": settings.stream_name,
        "WarehouseBucket": warehouse.netloc,
        "WarehousePrefix": warehouse.path.strip("/") or "*",
        "Namespace": settings.namespace,
        **{name: key_arn(key, settings.region, account_id) if key else "" for name, key in keys.items()},
    }
    policy = policy_template()
    unused = {"KmsForStream"} if not stream_key else set()
    unused |= {"KmsForWarehouse"} if not warehouse_key else set()
    statements = [statement for statement in policy["Statement"] if statement["Sid"] not in unused]
    return substitute({**policy, "Statement": statements}, values)
