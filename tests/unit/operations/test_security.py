"""The IAM policy covers exactly what the workbook runs: derived from the code, not from a list kept by hand.

The scan reads every module of the package and every notebook's code cells (syntax trees, not text):
SQL statement texts and their kinds, Iceberg procedures called, DataFrame writes, pyiceberg catalog
calls, and the boto3 client calls on the services the code creates clients for. ``icestream.operations.security``
maps each to the IAM actions Iceberg's GlueCatalog and S3FileIO (or the Kinesis API) need; a small
evaluator then asks the rendered policy whether it allows each action on the ARN the call would name, with the request's
condition keys (``s3:prefix``, ``kms:ViaService``, the S3 encryption context).

Also here, as they need no service: the policy's least-privilege shape, and the self-check of the credential
scanner that ``tests/reliability/test_security.py`` runs over the repository.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import re
from fnmatch import fnmatchcase
from pathlib import Path

import botocore.session
import pytest
from botocore import xform_name

from icestream.config import load_settings
from icestream.errors import ConfigError
from icestream.operations import security
from icestream.operations.security import iam_policy
from tests.helpers.security import leaks

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "lib" / "icestream"
# Modules left out of the scan, with the reason: nothing in them reaches AWS with the jobs' role.
NOT_SCANNED = {
    "reset.py": "`icestream reset` deletes the stream and the tables: a person runs it with their own "
    "credentials; the scheduled jobs' role must not be able to",
    "hot_shard.py": "notebook 01's hot-shard demo makes and deletes a stream of its own, only on an emulator "
    "(local, localstack profiles; tests/unit/producer/test_hot_shard.py)",
    "moto_kinesis.py": "patches moto's in-process Kinesis backend, whose methods are named like the API",
    "security.py": "holds the statement patterns this test applies; it runs no SQL",
}
CALL_PROCEDURE = re.compile(r"\bCALL\s+[\w{}`]+\.system\.(\w+)", re.IGNORECASE)

ACCOUNT_ID, REGION, KEY = "123456789012", "eu-west-1", "1234abcd-12ab-34cd-56ef-1234567890ab"
SETTINGS = load_settings(profile="aws", region=REGION, warehouse="s3://lake-bucket/icestream", stream_name="ev",
                         namespace="analytics", kms_key_id=KEY)  # fmt: skip
KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT_ID}:key/{KEY}"
TABLE_PATH = "icestream/analytics.db/user_events_time_travel"  # GlueCatalog's default table location
GLUE = f"arn:aws:glue:{REGION}:{ACCOUNT_ID}"
# Each kind of target as (ARN, request condition keys) pairs: every pair must be allowed.
TARGETS: dict[str, list[tuple[str, dict[str, str]]]] = {
    security.STREAM: [(f"arn:aws:kinesis:{REGION}:{ACCOUNT_ID}:stream/ev", {})],
    security.ACCOUNT: [("*", {})],
    security.BUCKET: [("arn:aws:s3:::lake-bucket", {"s3:prefix": f"{TABLE_PATH}/"})],
    security.OBJECTS: [(f"arn:aws:s3:::lake-bucket/{TABLE_PATH}/metadata/00001-x.metadata.json", {})],
    security.CATALOG_DATABASE: [(f"{GLUE}:catalog", {}), (f"{GLUE}:database/analytics", {})],
    security.CATALOG_TABLE: [
        (f"{GLUE}:catalog", {}),
        (f"{GLUE}:database/analytics", {}),
        (f"{GLUE}:table/analytics/user_events_time_travel", {}),
    ],
    security.STREAM_KEY: [(KEY_ARN, {"kms:ViaService": f"kinesis.{REGION}.amazonaws.com"})],
    # With an S3 Bucket Key the encryption context is the bucket's ARN, without one the object's.
    security.WAREHOUSE_KEY: [
        (KEY_ARN, {"kms:ViaService": f"s3.{REGION}.amazonaws.com", "kms:EncryptionContext:aws:s3:arn": arn})
        for arn in ("arn:aws:s3:::lake-bucket", f"arn:aws:s3:::lake-bucket/{TABLE_PATH}/data/part-0.parquet")
    ],
}


def _sources() -> dict[str, ast.Module]:
    """Syntax trees of the package's modules and the notebooks' code cells, by name."""
    trees = {
        str(path.relative_to(ROOT)): ast.parse(path.read_text())
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in NOT_SCANNED
    }
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for number, cell in enumerate(json.loads(notebook.read_text())["cells"]):
            if cell["cell_type"] == "code":
                lines = "".join(cell["source"]).splitlines()
                code = "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))
                trees[f"{notebook.relative_to(ROOT)}[{number}]"] = ast.parse(code)
    return trees


def _texts(tree: ast.Module) -> list[str]:
    """String literals that are not docstrings; an f-string as one text with ``{}`` for its fields."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skipped.add(id(first.value))
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(part) for part in node.values)
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            texts.append("".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            texts.append(node.value)
    return texts


@functools.cache
def _operations(service: str) -> dict[str, str]:
    """boto3 method name -> API operation name, from botocore's service model."""
    model = botocore.session.get_session().get_service_model(service)
    return {xform_name(name): name for name in model.operation_names}


def _api_operations(tree: ast.Module, services: set[str]) -> set[tuple[str, str]]:
    """(service, operation) of method calls named like an operation of a service the code has clients for."""
    names = {service: _operations(service) for service in services}
    return {
        (service, names[service][node.func.attr])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        for service in services
        if node.func.attr in names[service]
    }


@functools.cache
def derived_needs(encrypted: bool = True) -> tuple[dict[security.Grant, set[str]], dict[str, set[str]]]:
    """Every grant the code needs, with where each comes from, and what was found (for the checks)."""
    trees = _sources()
    found: dict[str, set[str]] = {key: set() for key in ("kinds", "procedures", "services", "operations", "pyiceberg")}
    uses: dict[str, set[str]] = {}  # a need ("kind:read", "procedure:x", "kinesis:GetRecords") -> where
    for tree in trees.values():
        for node in ast.walk(tree):
            is_call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            first = node.args[0] if is_call and node.args else None
            if is_call and node.func.attr == "client" and isinstance(first, ast.Constant):
                found["services"].add(first.value)
    for where, tree in trees.items():
        for text in _texts(tree):
            for kind in security.statement_kinds(text):
                uses.setdefault(f"kind:{kind}", set()).add(where)
            for name in CALL_PROCEDURE.findall(text):
                uses.setdefault(f"procedure:{name}", set()).add(where)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                first = node.args[0] if node.args else None
                if node.func.attr == "procedure" and isinstance(first, ast.Constant):
                    uses.setdefault(f"procedure:{first.value}", set()).add(where)
                if node.func.attr == "writeTo":
                    uses.setdefault("kind:dataframe write", set()).add(where)
                if node.func.attr in security.PYICEBERG_CATALOG_GRANTS:
                    uses.setdefault(f"pyiceberg:{node.func.attr}", set()).add(where)
        for service, operation in _api_operations(tree, found["services"]):
            uses.setdefault(f"{service}:{operation}", set()).add(where)
    grants: dict[security.Grant, set[str]] = {}
    for need, where in uses.items():
        family, name = need.split(":", 1)
        if family == "kind":
            needed = set(security.KIND_GRANTS[name])
            found["kinds"].add(name)
        elif family == "procedure":
            if name not in security.PROCEDURE_GRANTS:
                raise AssertionError(f"procedure {name} ({sorted(where)}): add what it needs to PROCEDURE_GRANTS")
            needed = set(security.PROCEDURE_GRANTS[name])
            found["procedures"].add(name)
        elif family == "pyiceberg":
            needed = set(security.PYICEBERG_CATALOG_GRANTS[name])
            found["pyiceberg"].add(name)
        elif family == "kinesis":
            needed = security.kinesis_grants(name, encrypted)
            found["operations"].add(name)
        else:
            raise AssertionError(f"{need} ({sorted(where)}): icestream.operations.security maps no {family} calls yet")
        for grant in needed:
            grants.setdefault(grant, set()).update(where)
    return grants, found


def _listed(value: str | list[str]) -> list[str]:
    return value if isinstance(value, list) else [value]


def _conditions_hold(conditions: dict[str, dict[str, str | list[str]]], context: dict[str, str]) -> bool:
    for operator, pairs in conditions.items():
        for key, wanted in pairs.items():
            if key not in context:
                return False  # IAM: a condition on a key the request lacks does not match
            if operator == "StringEquals":
                holds = context[key] in _listed(wanted)
            elif operator == "StringLike":
                holds = any(fnmatchcase(context[key], pattern) for pattern in _listed(wanted))
            else:
                raise AssertionError(f"condition operator {operator} is not modelled by this test")
            if not holds:
                return False
    return True


def allows(policy: dict, action: str, resource: str, context: dict[str, str]) -> bool:
    """Whether an Allow statement matches the action, the resource and the request's condition keys."""
    return any(
        statement["Effect"] == "Allow"
        and any(fnmatchcase(action.lower(), granted.lower()) for granted in _listed(statement["Action"]))
        and any(fnmatchcase(resource, granted) for granted in _listed(statement["Resource"]))
        and _conditions_hold(statement.get("Condition", {}), context)
        for statement in policy["Statement"]
    )


def missing_grants(policy: dict, grants: dict[security.Grant, set[str]]) -> dict[str, list[str]]:
    """``"action on arn": [where the code needs it]`` for each need the policy does not allow."""
    return {
        f"{action} on {resource}": sorted(where)[:3]
        for (action, target), where in grants.items()
        for resource, context in TARGETS[target]
        if not allows(policy, action, resource, context)
    }


def test_the_scan_sees_what_the_notebooks_run() -> None:
    grants, found = derived_needs()
    assert found["services"] == {"kinesis"}
    assert {"PutRecords", "GetRecords", "GetShardIterator", "ListShards"} <= found["operations"]
    assert {"drop table purge", "create table", "create namespace", "alter table", "read", "dataframe write"} <= (
        found["kinds"]
    )
    assert {"rewrite_data_files", "rewrite_manifests", "expire_snapshots", "remove_orphan_files"} <= (
        found["procedures"]
    )
    assert "load_table" in found["pyiceberg"]  # the third engine (lib/icestream/queries/pyiceberg_engine.py)
    # Notebook 04 re-creates its copy table with DROP TABLE ... PURGE (lake/table.py: recreate_events_copy).
    assert "lib/icestream/lake/table.py" in grants[("glue:DeleteTable", security.CATALOG_TABLE)]
    assert ("kms:GenerateDataKey", security.WAREHOUSE_KEY) in grants


def test_policy_allows_every_action_the_code_runs() -> None:
    grants, _ = derived_needs()
    policy = iam_policy(SETTINGS, account_id=ACCOUNT_ID)
    assert missing_grants(policy, grants) == {}


def test_policy_grants_nothing_the_code_does_not_run() -> None:
    grants, _ = derived_needs()
    needed = {action for action, _ in grants}
    policy = iam_policy(SETTINGS, account_id=ACCOUNT_ID)
    granted = {action for statement in policy["Statement"] for action in _listed(statement["Action"])}
    assert granted - needed == set()


def test_the_check_catches_a_missing_action() -> None:
    """Without glue:DeleteTable (the policy before issue 14) the check names the DROP TABLE's call site."""
    grants, _ = derived_needs()
    policy = iam_policy(SETTINGS, account_id=ACCOUNT_ID)
    for statement in policy["Statement"]:
        statement["Action"] = [action for action in statement["Action"] if action != "glue:DeleteTable"]
    missing = missing_grants(policy, grants)
    drop = f"glue:DeleteTable on {GLUE}:table/analytics/user_events_time_travel"
    assert "lib/icestream/lake/table.py" in missing[drop]


def test_keys_are_used_only_through_their_service_and_the_warehouse() -> None:
    policy = iam_policy(SETTINGS, account_id=ACCOUNT_ID)
    for action in ("kms:Decrypt", "kms:GenerateDataKey"):
        assert not allows(policy, action, KEY_ARN, {})  # not directly
        assert not allows(policy, action, KEY_ARN, {"kms:ViaService": f"sqs.{REGION}.amazonaws.com"})
        other = {"kms:ViaService": f"s3.{REGION}.amazonaws.com", "kms:EncryptionContext:aws:s3:arn": "arn:aws:s3:::x"}
        assert not allows(policy, action, KEY_ARN, other)
    assert not allows(policy, "s3:GetObject", "arn:aws:s3:::lake-bucket/elsewhere/x", {})
    assert not allows(policy, "s3:ListBucket", "arn:aws:s3:::lake-bucket", {"s3:prefix": "elsewhere/"})
    assert not allows(policy, "glue:DeleteTable", f"{GLUE}:table/other_db/t", {})


def test_warehouse_key_follows_the_setting() -> None:
    by_sid = {s["Sid"]: s for s in iam_policy(SETTINGS, ACCOUNT_ID, warehouse_kms_key_id="alias/lake")["Statement"]}
    assert by_sid["KmsForWarehouse"]["Resource"] == f"arn:aws:kms:{REGION}:{ACCOUNT_ID}:alias/lake"
    assert by_sid["KmsForStream"]["Resource"] == KEY_ARN
    sse_s3 = iam_policy(SETTINGS, ACCOUNT_ID, warehouse_kms_key_id="")
    assert "KmsForWarehouse" not in {statement["Sid"] for statement in sse_s3["Statement"]}
    assert "${" not in json.dumps(sse_s3)


def test_a_placeholder_without_a_value_is_refused() -> None:
    with pytest.raises(ConfigError, match="Unknown"):
        security.substitute({"Resource": "arn:${Unknown}"}, {})


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("DROP TABLE IF EXISTS {} PURGE", "drop table purge"),
        ("DROP TABLE lake.ns.t", "drop table"),
        ("ALTER TABLE {} RENAME TO lake.ns.u", "rename table"),
        ("ALTER TABLE {} CREATE OR REPLACE TAG v1", "alter table"),
        ("CREATE NAMESPACE IF NOT EXISTS {}", "create namespace"),
        ("CREATE TABLE IF NOT EXISTS {} (id string) USING iceberg", "create table"),
        ("MERGE INTO {} t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", "write"),
        ("SELECT count(*) FROM {}.snapshots", "read"),
        ("SHOW TBLPROPERTIES {}", "read"),
        ("SHOW TABLES IN lake.ns", "list tables"),
    ],
)
def test_statement_kinds(sql: str, kind: str) -> None:
    assert security.statement_kinds(sql) == {kind}
    assert security.statement_kinds("a shard's sequence number") == set()


def test_iam_policy_is_least_privilege() -> None:
    template = security.policy_template()
    assert "${AWS::AccountId}" in json.dumps(template)  # CloudFormation Fn::Sub variables
    aws = load_settings(profile="aws", region="eu-west-1", warehouse="s3://lake-bucket/icestream", stream_name="ev",
                        namespace="analytics", kms_key_id="1234abcd-12ab-34cd-56ef-1234567890ab")  # fmt: skip
    policy = iam_policy(aws, account_id="123456789012")
    statements = {statement["Sid"]: statement for statement in policy["Statement"]}
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        assert all("*" not in action for action in statement["Action"]), statement
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if statement["Sid"] == "KinesisListForDoctor":
            assert statement["Action"] == ["kinesis:ListStreams"]  # an account-level action: AWS allows only "*"
        else:
            assert all((resource != "*" and "123456789012" in resource) or resource.startswith("arn:aws:s3:::")
                       for resource in resources), statement  # fmt: skip
    assert statements["KinesisStream"]["Resource"] == "arn:aws:kinesis:eu-west-1:123456789012:stream/ev"
    assert statements["WarehouseObjects"]["Resource"] == "arn:aws:s3:::lake-bucket/icestream/*"
    assert "arn:aws:glue:eu-west-1:123456789012:table/analytics/*" in statements["GlueCatalog"]["Resource"]
    assert statements["KmsForStream"]["Resource"].endswith(":key/1234abcd-12ab-34cd-56ef-1234567890ab")
    assert "${" not in json.dumps(policy)
    assert statements["KmsForWarehouse"]["Condition"]["StringEquals"]["kms:ViaService"] == "s3.eu-west-1.amazonaws.com"
    without_key = iam_policy(dataclasses.replace(aws, kms_key_id=None), account_id="123456789012")
    assert {"KmsForStream", "KmsForWarehouse"}.isdisjoint(statement["Sid"] for statement in without_key["Statement"])


def test_the_credential_scanner_finds_a_planted_credential() -> None:
    """The scanner ``tests/reliability/test_security.py`` runs over the repository and the executed notebooks."""
    # Built at run time, so the repository never holds a string the scanner would flag.
    planted = "aws_access_key_id = AKIA" + "Q" * 16 + "\naws_secret_access_key = " + "k" * 40
    assert set(leaks(planted)) == {"access key id", "secret access key"}
    assert leaks("aws_secret_access_key=testing") == []  # the emulator's dummy key is no credential
