"""The IAM policy covers exactly what the workbook runs: derived from the code, not from a list kept by hand.

The scan reads every module of the package and every notebook's code cells (syntax trees, not text):
SQL statement texts and their kinds, Iceberg procedures called, DataFrame writes, pyiceberg catalog
calls, and the boto3 client calls on the services the code creates clients for. ``icestream.deploy.security``
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
from icestream.deploy import security
from icestream.deploy.security import iam_policy
from icestream.errors import ConfigError
from tests.helpers.security import client_calls, client_factories, leaks, unit_of

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "lib" / "icestream"
# Modules left out of the scan, with the reason: nothing in them reaches AWS with the jobs' role.
NOT_SCANNED = {
    "reset.py": "`icestream reset` deletes the stream and the tables: a person runs it with their own "
    "credentials; the scheduled jobs' role must not be able to",
    "hot_shard.py": "notebook 01's hot-shard demo makes and deletes a stream of its own, only on an emulator "
    "(local, localstack profiles; tests/unit/demos/test_hot_shard.py)",
    "routed_demo.py": "notebook 05's routed demo makes and deletes a stream of its own, only on an emulator "
    "(local, localstack profiles; tests/integration/test_routed_demo.py)",
    "change_demo.py": "notebook 06's change stream makes and deletes a stream of its own, only on an emulator "
    "(local, localstack profiles; notebooks/06_row_level_changes.ipynb)",
    "metrics_demo.py": "notebook 07's metrics demo makes and deletes a stream of its own, only on an emulator "
    "(local, localstack profiles; notebooks/07_continuous_aggregate.ipynb)",
    "moto_kinesis.py": "patches moto's in-process Kinesis backend, whose methods are named like the API",
    "security.py": "holds the statement patterns this test applies; it runs no SQL",
}
# Code units (``path::top-level name``) left out, with the reason.
NOT_SCANNED_UNITS = {
    "lib/icestream/runtime/aws.py::ensure_bucket": "creates the bucket on an emulator only (runtime/spark.py's "
    "prepare_runtime calls it for the localstack profile); on AWS the stack makes the bucket",
}
# Notebook cells left out (the notebook, a name only those cells use), with the reason.
NOT_SCANNED_CELLS = {
    ("01_produce_events.ipynb", "api_stream"): "notebook 01's three boto3 calls make and delete a stream of "
    "their own, only on an emulator (`api_lesson = settings.is_local_endpoint`)",
}
# Units whose text matches a statement pattern without running SQL, for the duty checks (a message, not a query).
NOT_SQL = {"lib/icestream/producer/plan.py::write_limit": "'Could not describe stream' in an error message"}
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
            skipped = any(
                notebook.name == name and marker in "".join(cell["source"]) for name, marker in NOT_SCANNED_CELLS
            )
            if cell["cell_type"] == "code" and not skipped:
                lines = "".join(cell["source"]).splitlines()
                code = "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))
                trees[f"{notebook.relative_to(ROOT)}[{number}]"] = ast.parse(code)
    return trees


def _texts(tree: ast.Module, units: dict[int, str]) -> list[tuple[str, str]]:
    """String literals that are not docstrings, with their unit; an f-string as one text with ``{}`` for its fields."""
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
            text = "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
            texts.append((text, units[id(node)]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            texts.append((node.value, units[id(node)]))
    return texts


@functools.cache
def _operations(service: str) -> dict[str, str]:
    """boto3 method name -> API operation name, from botocore's service model."""
    model = botocore.session.get_session().get_service_model(service)
    return {xform_name(name): name for name in model.operation_names}


def _created(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Service -> the code units (``path::name``) that create a client of it, however they create it."""
    factories = client_factories(trees)
    created: dict[str, set[str]] = {}
    for where, tree in trees.items():
        for unit, service in client_calls(tree, factories, {})[1]:
            created.setdefault(service, set()).add(f"{where}::{unit}")
    return created


def _check_clients(trees: dict[str, ast.Module]) -> None:
    """Fail on a client of a service whose calls no role's grants are derived for."""
    unmapped = {
        service: sorted(units) for service, units in _created(trees).items() if service not in security.API_SERVICES
    }
    assert not unmapped, f"AWS clients of services no role maps (security.API_SERVICES): {unmapped}"


@functools.cache
def derived_needs(encrypted: bool = True) -> tuple[dict[security.Grant, set[str]], dict[str, set[str]]]:
    """Every grant the code needs, with where each comes from, and what was found (for the checks)."""
    trees = _sources()
    _check_clients(trees)
    found: dict[str, set[str]] = {key: set() for key in ("kinds", "procedures", "services", "operations", "pyiceberg")}
    uses: dict[str, set[str]] = {}  # a need ("kind:read", "procedure:x", "kinesis:GetRecords") -> "path::unit"
    factories = client_factories(trees)
    found["services"] = set(_created(trees))
    operations = {service: _operations(service) for service in found["services"]}
    for where, tree in trees.items():
        units = unit_of(tree)
        for text, unit in _texts(tree, units):
            for kind in security.statement_kinds(text) if f"{where}::{unit}" not in NOT_SQL else ():
                uses.setdefault(f"kind:{kind}", set()).add(f"{where}::{unit}")
            for name in CALL_PROCEDURE.findall(text):
                uses.setdefault(f"procedure:{name}", set()).add(f"{where}::{unit}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                at = f"{where}::{units[id(node)]}"
                first = node.args[0] if node.args else None
                # LakeTable.procedure builds a CALL; Maintenance._call_procedure runs one (version-aware).
                if node.func.attr in ("procedure", "_call_procedure") and isinstance(first, ast.Constant):
                    uses.setdefault(f"procedure:{first.value}", set()).add(at)
                if node.func.attr == "writeTo":
                    uses.setdefault("kind:dataframe write", set()).add(at)
                if node.func.attr in security.PYICEBERG_CATALOG_GRANTS:
                    uses.setdefault(f"pyiceberg:{node.func.attr}", set()).add(at)
        for unit, service, operation in client_calls(tree, factories, operations)[0]:
            uses.setdefault(f"{service}:{operation}", set()).add(f"{where}::{unit}")
    uses = {need: where - set(NOT_SCANNED_UNITS) for need, where in uses.items() if where - set(NOT_SCANNED_UNITS)}
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
        elif family in security.API_SERVICES:
            needed = security.api_grants(family, name, encrypted)
            found["operations"].add(f"{family}:{name}")
        else:
            raise AssertionError(f"{need} ({sorted(where)}): icestream.deploy.security maps no {family} calls yet")
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
    # Every way the code makes a client is seen: session.client("kinesis") inside KinesisConnection.client,
    # aws.client(settings, "glue") in the catalog and pyiceberg engine, aws.client(settings, "s3") for emulators.
    assert found["services"] == {"kinesis", "glue", "s3"}
    assert {"kinesis:PutRecords", "kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards"} <= (
        found["operations"]
    )
    assert "glue:GetTable" in found["operations"]  # runtime/catalog.py: glue = aws.client(settings, "glue")
    assert {"drop table purge", "create table", "create namespace", "alter table", "read", "dataframe write"} <= (
        found["kinds"]
    )
    assert {"rewrite_data_files", "rewrite_manifests", "expire_snapshots", "remove_orphan_files"} <= (
        found["procedures"]
    )
    assert "load_table" in found["pyiceberg"]  # the third engine (lib/icestream/queries/pyiceberg_engine.py)
    # Notebook 04 re-creates its copy table with DROP TABLE ... PURGE (lake/table.py: recreate_events_copy).
    assert "lib/icestream/lake/table.py::recreate_events_copy" in grants[("glue:DeleteTable", security.CATALOG_TABLE)]
    assert ("kms:GenerateDataKey", security.WAREHOUSE_KEY) in grants


def test_every_way_of_making_a_client_is_found() -> None:
    """boto3.client, session.client, aws.client(settings, ...), wrappers of those, and methods returning one."""
    code = """
import boto3
def direct():
    return boto3.client("sqs").send_message(QueueUrl="q", MessageBody="b")
def from_session(session):
    session.client("glue").get_table(DatabaseName="d", Name="t")
def wrapped(settings):
    return aws.client(settings, "s3")
def uses_wrapper(settings):
    s3 = wrapped(settings)
    s3.get_object(Bucket="b", Key="k")
class Connection:
    def client(self):
        return self.session.client("kinesis")
def uses_method(connection):
    connection.client().put_records(StreamName="s", Records=[])
"""
    trees = {"x.py": ast.parse(code)}
    operations = {service: _operations(service) for service in ("sqs", "glue", "s3", "kinesis")}
    calls, created = client_calls(trees["x.py"], client_factories(trees), operations)
    assert calls == {
        ("direct", "sqs", "SendMessage"),
        ("from_session", "glue", "GetTable"),
        ("uses_wrapper", "s3", "GetObject"),
        ("uses_method", "kinesis", "PutRecords"),
    }
    assert {service for _, service in created} == {"sqs", "glue", "s3", "kinesis"}
    with pytest.raises(AssertionError, match="sqs"):  # a client of a service no role maps fails the scan
        _check_clients(trees)


def _duty_needs(duty: str) -> dict[security.Grant, set[str]]:
    """What the code a duty runs needs (``policies/duties.json``: its code units)."""
    grants, _ = derived_needs()
    patterns = security.duties()[duty]["code"]
    needs = {grant: {w for w in where if any(fnmatchcase(w, p) for p in patterns)} for grant, where in grants.items()}
    return {grant: where for grant, where in needs.items() if where}


@pytest.mark.parametrize("duty", sorted(security.duties()))
def test_each_role_allows_what_its_code_calls(duty: str) -> None:
    policy = security.duty_policy(iam_policy(SETTINGS, account_id=ACCOUNT_ID), duty)
    assert missing_grants(policy, _duty_needs(duty)) == {}


@pytest.mark.parametrize("duty", sorted(security.duties()))
def test_each_role_grants_nothing_its_code_does_not_call(duty: str) -> None:
    needed = {action for action, _ in _duty_needs(duty)}
    policy = security.duty_policy(iam_policy(SETTINGS, account_id=ACCOUNT_ID), duty)
    granted = {action for statement in policy["Statement"] for action in _listed(statement["Action"])}
    assert granted - needed == set()


def test_each_role_names_code_that_exists() -> None:
    units = {where for wheres in derived_needs()[0].values() for where in wheres}
    for duty, spec in security.duties().items():
        for pattern in spec["code"]:
            assert any(fnmatchcase(unit, pattern) for unit in units), (
                f"{duty}: {pattern} matches no code that calls AWS"
            )


def test_the_job_roles_cannot_set_up_or_tear_down() -> None:
    """Issue 26: the jobs' roles may not create streams, write records, encrypt streams, create databases, drop."""
    forbidden = {"kinesis:CreateStream", "kinesis:PutRecords", "kinesis:StartStreamEncryption", "glue:CreateDatabase",
                 "glue:DeleteTable"}  # fmt: skip
    for duty in ("ingest", "maintenance"):
        policy = security.duty_policy(iam_policy(SETTINGS, account_id=ACCOUNT_ID), duty)
        assert forbidden.isdisjoint(action for statement in policy["Statement"] for action in statement["Action"])


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
    assert "lib/icestream/lake/table.py::recreate_events_copy" in missing[drop]


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


@pytest.mark.parametrize(("region", "partition"), [("eu-west-1", "aws"), ("cn-north-1", "aws-cn"),
                                                   ("us-gov-west-1", "aws-us-gov")])  # fmt: skip
def test_the_policy_names_the_regions_partition(region: str, partition: str) -> None:
    policy = iam_policy(dataclasses.replace(SETTINGS, region=region), account_id=ACCOUNT_ID)
    arns = re.findall(r'"(arn:[^:"]*):', json.dumps(policy))
    assert arns
    assert set(arns) == {f"arn:{partition}"}


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
