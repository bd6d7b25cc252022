"""Security: no credentials anywhere, validated identifiers only, KMS, loopback only.

The checks that need no service are unit tests: the scanner's own check and the IAM policy in
``tests/unit/deploy/test_security.py``, names refused by settings in ``tests/unit/test_config.py``.
"""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from icestream.config import load_settings, project_home
from icestream.errors import ConfigError
from icestream.kinesis.clients import ensure_stream, kinesis_client, kinesis_connection
from tests.helpers.security import INJECTIONS, leaks
from tests.reliability import figures


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


def test_no_credentials_in_repository_notebooks_or_outputs(settings) -> None:
    files = _scanned_files(settings.path("output_dir"))
    found = {str(path): kinds for path in files if (kinds := leaks(path.read_text(errors="replace")))}
    notebooks = [path for path in files if path.suffix == ".ipynb"]
    figures.record("security", "credential scan", files=len(files), notebooks=len(notebooks), findings=len(found))
    assert len(files) > 20, "the scan saw the repository"
    assert found == {}


def test_names_that_bypass_settings_still_never_reach_sql(spark, settings) -> None:
    """Even a Settings object built around validation is stopped by the one identifier gate."""
    from icestream.ingest.positions import load_committed, mark_source_stream
    from icestream.lake.table import setup_tables

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
