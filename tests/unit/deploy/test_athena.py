"""The Athena named queries: Trino SQL that parses, reads columns the tables have, and a cfn-lint clean stack part."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import botocore.session
import pytest
import sqlglot
from botocore.validate import validate_parameters
from sqlglot import exp

from icestream.config import load_settings
from icestream.deploy import athena
from icestream.lake.schema import DEVICE_FIELDS, REJECT_COLUMNS_DDL, table_columns
from tests.helpers.cloudformation import resolve

QUERIES = athena.named_queries()
# Stack values for resolving the intrinsic functions the way CloudFormation would.
STACK = {
    "AWS::StackName": "lake",
    "WarehouseBucket": "lake-bucket",
    "ArtifactsPrefix": "artifacts",
    "Namespace": "analytics",
    "DataKey.Arn": "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    "AthenaWorkGroup": "icestream-lake",
}
REJECT_COLUMNS = frozenset(column.split()[0] for column in REJECT_COLUMNS_DDL)


def by_key(key: str) -> athena.AthenaQuery:
    return next(query for query in QUERIES if query.key == key)


def referenced_columns(tree: exp.Expression) -> set[tuple[str, str]]:
    """``(qualifier, column)`` pairs the statement reads; ORDER BY may name its own output aliases instead."""
    aliases = {alias.alias for alias in tree.find_all(exp.Alias)}
    ordering = {id(column) for order in tree.find_all(exp.Order) for column in order.find_all(exp.Column)}
    return {
        (column.table, column.name)
        for column in tree.find_all(exp.Column)
        if not (id(column) in ordering and not column.table and column.name in aliases)
    }


@pytest.mark.parametrize("query", QUERIES, ids=lambda query: query.key)
def test_each_query_parses_as_trino_and_has_its_parameters(query: athena.AthenaQuery) -> None:
    tree = sqlglot.parse_one(query.sql, read="trino")
    assert isinstance(tree, exp.Select)
    assert len(list(tree.find_all(exp.Placeholder))) == len(query.parameters) == athena.parameter_count(query.sql)


@pytest.mark.parametrize("query", QUERIES, ids=lambda query: query.key)
def test_each_query_reads_columns_its_table_has(query: athena.AthenaQuery) -> None:
    tree = sqlglot.parse_one(query.sql, read="trino")
    table = tree.find(exp.Table).name
    if query.metadata_table:
        assert table == f"user_events${query.metadata_table}"
        known = {("", name) for name in athena.METADATA_COLUMNS[query.metadata_table]}
    elif table.endswith("_rejects"):
        known = {("", name) for name in REJECT_COLUMNS}
    else:
        assert table == "user_events"
        known = {("", name) for name in table_columns()} | {("device_info", name) for name in DEVICE_FIELDS}
    columns = referenced_columns(tree)
    assert columns, "a query that reads no column checks nothing"
    assert columns <= known, f"unknown columns: {sorted(columns - known)}"


def test_the_column_check_catches_a_misspelt_column() -> None:
    tree = sqlglot.parse_one("SELECT count(DISTINCT usr_id) AS users FROM user_events", read="trino")
    assert ("", "usr_id") in referenced_columns(tree)
    assert ("", "usr_id") not in {("", name) for name in table_columns()}


def test_time_travel_and_metadata_queries_use_athenas_forms() -> None:
    assert "FOR VERSION AS OF ?" in by_key("CountsAtVersion").sql
    assert "FOR TIMESTAMP AS OF from_iso8601_timestamp(?)" in by_key("CountsAtTime").sql
    tables = {sqlglot.parse_one(query.sql, read="trino").find(exp.Table).name for query in QUERIES}
    for metadata in ("files", "manifests", "partitions", "snapshots", "history"):
        assert f"user_events${metadata}" in tables


def test_every_query_is_accounted_for() -> None:
    assert {query.notebook for query in QUERIES} == {"03", "04", "09"}
    assert len({query.key for query in QUERIES}) == len(QUERIES)
    for query in QUERIES:
        assert query.spark_function.startswith("icestream."), f"{query.key}: name the Spark function it mirrors"
        assert bool(query.metadata_table) <= bool(query.duckdb_blocker), f"{query.key}: DuckDB has no metadata tables"


def test_the_docs_name_every_query() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "athena.md").read_text()
    missing = [query.key for query in QUERIES if f"| `{query.key}` |" not in text]
    assert not missing, f"docs/athena.md has no row for {missing}"


def test_table_names_come_from_the_settings() -> None:
    queries = athena.named_queries(load_settings(table="clicks"))
    tables = {sqlglot.parse_one(query.sql, read="trino").find(exp.Table).name for query in queries}
    assert {"clicks", "clicks_rejects", "clicks$files"} <= tables
    assert not any("user_events" in name for name in tables)


def test_named_queries_run_in_the_namespace_database_and_the_workgroup() -> None:
    resources = athena.athena_resources()
    named = {key: value for key, value in resources.items() if value["Type"] == "AWS::Athena::NamedQuery"}
    assert set(named) == {query.resource_id for query in QUERIES}
    for query in QUERIES:
        properties = named[query.resource_id]["Properties"]
        assert properties["QueryString"] == query.sql
        assert properties["Database"] == {"Ref": "Namespace"}
        assert properties["WorkGroup"] == {"Ref": "AthenaWorkGroup"}
    settings = resources["AthenaWorkGroup"]["Properties"]["WorkGroupConfiguration"]
    assert settings["EnforceWorkGroupConfiguration"] is True
    assert settings["EngineVersion"]["SelectedEngineVersion"] == "Athena engine version 3"
    assert settings["ResultConfiguration"]["EncryptionConfiguration"]["EncryptionOption"] == "SSE_KMS"
    assert settings["BytesScannedCutoffPerQuery"] >= 10_000_000  # Athena's minimum is 10 MB


def test_the_resources_are_requests_athenas_api_accepts() -> None:
    """Resolved for a stack, each resource's properties are a valid CreateWorkGroup / CreateNamedQuery request."""
    model = botocore.session.get_session().get_service_model("athena")
    resources = resolve(athena.athena_resources(), STACK)
    workgroup = resources.pop("AthenaWorkGroup")["Properties"]
    assert workgroup.pop("State") == "ENABLED"  # CloudFormation's; the API sets it with UpdateWorkGroup
    configuration = workgroup.pop("WorkGroupConfiguration")
    request = {**workgroup, "Configuration": configuration}
    validate_parameters(request, model.operation_model("CreateWorkGroup").input_shape)
    results = request["Configuration"]["ResultConfiguration"]
    assert results["OutputLocation"] == "s3://lake-bucket/artifacts/athena-results/"
    assert results["EncryptionConfiguration"]["KmsKey"] == STACK["DataKey.Arn"]
    assert request["Name"] == "icestream-lake"
    for resource in resources.values():
        query = resource["Properties"]
        validate_parameters(query, model.operation_model("CreateNamedQuery").input_shape)
        assert (query["Database"], query["WorkGroup"]) == ("analytics", "icestream-lake")


def minimal_template() -> dict:
    """The Athena resources with stubs of the names they use from the stack's template."""
    key_policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}},
                "Action": "kms:*",
                "Resource": "*",
            }
        ],
    }
    stubs = {
        "DataKey": {
            "Type": "AWS::KMS::Key",
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": {"EnableKeyRotation": True, "KeyPolicy": key_policy},
        },
        "WarehouseBucket": {
            "Type": "AWS::S3::Bucket",
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    }
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {
            "Namespace": {"Type": "String", "Default": "streaming_analytics"},
            "ArtifactsPrefix": {"Type": "String", "Default": "artifacts"},
        },
        "Resources": {**stubs, **athena.athena_resources()},
    }


def test_the_resources_pass_cfn_lint_with_informational_checks(tmp_path: Path) -> None:
    path = tmp_path / "athena.json"
    path.write_text(json.dumps(minimal_template(), indent=1))
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run(
        [str(cfn_lint), "--include-checks", "I", "--", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_cfn_lint_would_catch_a_bad_property(tmp_path: Path) -> None:
    template = minimal_template()
    template["Resources"]["AthenaWorkGroup"]["Properties"]["WorkGroupConfiguration"]["EngineVersion"] = "3"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(template))
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run([str(cfn_lint), "--", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode != 0
