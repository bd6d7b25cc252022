"""Security: no credentials anywhere, validated identifiers only, least-privilege IAM, KMS, loopback only."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from icestream.config import load_settings, project_home, validate_identifier
from icestream.errors import ConfigError
from icestream.operations.security import iam_policy, policy_template
from icestream.stream.clients import ensure_stream, kinesis_client, kinesis_connection
from tests.reliability import figures

pytestmark = pytest.mark.reliability

# What a leaked AWS credential or private key looks like (AWS's documented formats).
CREDENTIAL_PATTERNS = {
    "access key id": re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    "secret access key": re.compile(
        r"(?i)(?:aws_secret_access_key|secretaccesskey|secret_key)[\"'\s]*[:=]\s*[\"']?[A-Za-z0-9/+]{40}\b"
    ),
    "session token": re.compile(r"(?i)aws_session_token[\"'\s]*[:=]\s*[\"']?[A-Za-z0-9/+=]{100,}"),
    "private key": re.compile(r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----"),
}
INJECTIONS = [
    "events; DROP TABLE lake.x",
    "events --",
    "a.b",
    "x` OR `1`=`1",
    "' OR '1'='1",
    "t/*c*/",
    "",
    "1events",
    "events\n",
    "évents",
    "a" * 129,
    "${jndi:ldap://127.0.0.1/x}",
]


def _leaks(text: str) -> list[str]:
    return [name for name, pattern in CREDENTIAL_PATTERNS.items() if pattern.search(text)]


def _scanned_files(session_output: Path) -> list[Path]:
    home = project_home()
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=home, capture_output=True, text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    files = [home / name for name in listed]
    # Executed notebooks (gitignored, but people share them) from `make run` and from this test session.
    for folder in (home / "output", session_output):
        if folder.is_dir():
            files += sorted(folder.rglob("*.ipynb")) + sorted(folder.rglob("*.json"))
    return [path for path in files if path.is_file() and path.stat().st_size < 20 * 2**20]


def test_the_scanner_finds_a_planted_credential() -> None:
    # Built at run time, so the repository never holds a string the scanner would flag.
    planted = "aws_access_key_id = AKIA" + "Q" * 16 + "\naws_secret_access_key = " + "k" * 40
    assert set(_leaks(planted)) == {"access key id", "secret access key"}
    assert _leaks("aws_secret_access_key=testing") == []  # the emulator's dummy key is no credential


def test_no_credentials_in_repository_notebooks_or_outputs(settings) -> None:
    files = _scanned_files(settings.path("output_dir"))
    found = {str(path): leaks for path in files if (leaks := _leaks(path.read_text(errors="replace")))}
    notebooks = [path for path in files if path.suffix == ".ipynb"]
    figures.record("security", "credential scan", files=len(files), notebooks=len(notebooks), findings=len(found))
    assert len(files) > 20, "the scan saw the repository"
    assert found == {}


@pytest.mark.parametrize("name", INJECTIONS)
def test_injection_strings_are_refused_as_names(name: str) -> None:
    # Settings strip surrounding whitespace and read "" as "not given" (a notebook parameter left
    # empty), so those two reach validation as a plain name or the default; the gate sees the rest.
    if name.strip() and name == name.strip():
        for setting in ("namespace", "table", "catalog"):
            with pytest.raises(ConfigError):
                load_settings(**{setting: name})
    with pytest.raises(ConfigError):
        validate_identifier(name)


def test_names_that_bypass_settings_still_never_reach_sql(spark, settings) -> None:
    """Even a Settings object built around validation is stopped by the one identifier gate."""
    from icestream.ingest.positions import load_committed, mark_source_stream
    from icestream.lake.ddl import setup_tables

    warehouse = settings.path("warehouse")
    before = sorted(warehouse.rglob("*")) if warehouse.exists() else []
    refused = 0
    for name in INJECTIONS:
        forged = dataclasses.replace(settings, namespace=name)
        with pytest.raises(ConfigError):
            setup_tables(spark, forged)
        refused += 1
        if "." in name:
            continue  # in a dotted name it is two valid parts, not an injection
        with pytest.raises(ConfigError):
            load_committed(spark, f"lake.{name}.t", "stream")
        with pytest.raises(ConfigError):
            mark_source_stream(spark, f"lake.ns.{name}", "stream")
        refused += 2
    assert (sorted(warehouse.rglob("*")) if warehouse.exists() else []) == before, "nothing was created"
    for stream in ("s'); DROP TABLE x; --", "s' = 'x", "a b"):
        with pytest.raises(ConfigError):
            load_settings(stream_name=stream)
        refused += 1
    figures.record("security", "SQL injection as names", attempts=refused, refused=refused, reached_sql=0)


def test_iam_policy_is_least_privilege() -> None:
    template = policy_template()
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
    actions = sum(len(statement["Action"]) for statement in policy["Statement"])
    figures.record("security", "IAM policy", statements=len(policy["Statement"]), actions=actions,
                   wildcard_actions=0, wildcard_resources=1)  # fmt: skip


def test_stream_encryption_with_a_kms_key(emulator: str, settings) -> None:
    import boto3

    kms = boto3.client("kms", endpoint_url=emulator, region_name=settings.region, aws_access_key_id="testing",
                       aws_secret_access_key="testing")  # fmt: skip
    key_id = kms.create_key(Description="icestream test stream key")["KeyMetadata"]["KeyId"]
    encrypted = load_settings(stream_name=f"kms-{uuid.uuid4().hex[:8]}", kms_key_id=key_id)
    ensure_stream(encrypted, shard_count=1)
    client = kinesis_client(encrypted)
    summary = client.describe_stream_summary(StreamName=encrypted.stream_name)["StreamDescriptionSummary"]
    client.put_record(StreamName=encrypted.stream_name, Data=b'{"x": 1}', PartitionKey="k")
    iterator = client.get_shard_iterator(StreamName=encrypted.stream_name, ShardId="shardId-000000000000",
                                         ShardIteratorType="TRIM_HORIZON")["ShardIterator"]  # fmt: skip
    records = client.get_records(ShardIterator=iterator)["Records"]
    figures.record("security", "KMS stream encryption", encryption=summary.get("EncryptionType"),
                   key_matches=int(summary.get("KeyId") == key_id), readable=len(records))  # fmt: skip
    assert summary["EncryptionType"] == "KMS"
    assert summary["KeyId"] == key_id
    assert [record["Data"] for record in records] == [b'{"x": 1}']


def _listeners(port: int) -> list[str]:
    """Local addresses LISTENing on ``port`` (from /proc/net/tcp and tcp6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.rsplit(":", 1)
            if state == "0A" and int(port_hex, 16) == port:
                found.append(address)
    return found


def test_emulator_listens_on_loopback_only(emulator: str) -> None:
    port = int(emulator.rsplit(":", 1)[1])
    listeners = _listeners(port)
    assert listeners == ["0100007F"], listeners  # 127.0.0.1, and no IPv6 or wildcard socket
    others = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
    others = {address for address in others if not address.startswith("127.")}
    for address in others:
        with (
            pytest.raises((ConnectionRefusedError, TimeoutError)),
            socket.create_connection((address, port), timeout=2),
        ):
            pass
    with pytest.raises(ConfigError, match="local profile"):
        kinesis_connection(load_settings(kinesis_endpoint="http://10.0.0.5:4566"))
    figures.record("security", "emulator binding", listeners="127.0.0.1", other_addresses_refused=len(others))
