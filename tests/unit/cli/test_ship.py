"""``icestream ship --target emr-serverless|glue``: the upload folder and the lines for a stack's outputs."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from icestream import cli
from icestream.runtime import shipping
from icestream.runtime.build_stamp import build_id

STACK = {
    "Stacks": [{
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/icestream/abc",
        "Parameters": [{"ParameterKey": key, "ParameterValue": value} for key, value in (
            ("StreamName", "user-events"), ("ArtifactsPrefix", "artifacts"), ("WarehousePrefix", "warehouse"),
            ("Namespace", "streaming_analytics"))],
        "Outputs": [{"OutputKey": key, "OutputValue": value} for key, value in (
            ("ApplicationId", "00fabc"), ("WarehouseBucket", "icestream-bucket"),
            ("DataKey.Arn", "arn:aws:kms:eu-west-1:123456789012:key/k1"))],
    }]
}  # fmt: skip
ROLES = ["--value", "IngestJobRole.Arn=arn:aws:iam::123456789012:role/ingest",
         "--value", "MaintenanceJobRole.Arn=arn:aws:iam::123456789012:role/maintain"]  # fmt: skip


@pytest.fixture
def stack_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # The archives are built by runtime.shipping (tested there and in tests/cluster); stand-ins here.
    archive = tmp_path / "built.tar.gz"
    archive.write_bytes(b"packed")
    monkeypatch.setattr(shipping, "packed_environment", lambda settings, **_: archive)
    monkeypatch.setattr(shipping, "package_zip", lambda settings: archive)
    path = tmp_path / "stack.json"
    path.write_text(json.dumps(STACK))
    return path


def _lines(capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    return [shlex.split(line) for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]


def test_emr_serverless_lines_upload_stamped_entry_points_and_start_both_jobs(
    stack_json: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "upload"
    assert (
        cli.main(["ship", "--target", "emr-serverless", "--stack-json", str(stack_json), "--out", str(out), *ROLES])
        == 0
    )
    lines = _lines(capsys)
    uploads = [line for line in lines if line[:3] == ["aws", "s3", "cp"]]
    assert [(Path(line[3]).name, line[4]) for line in uploads] == [
        (name, f"s3://icestream-bucket/artifacts/{name}")
        for name in ("ingest.py", "icestream_cli.py", "icestream_env.tar.gz")
    ]
    for name in ("ingest.py", "icestream_cli.py"):
        assert f"SHIPPED_BUILD: str | None = {build_id()!r}" in (out / name).read_text()
    requests = [json.loads(line[-1]) for line in lines if line[:3] == ["aws", "emr-serverless", "start-job-run"]]
    assert [(r["applicationId"], r["jobDriver"]["sparkSubmit"]["entryPoint"]) for r in requests] == [
        ("00fabc", "s3://icestream-bucket/artifacts/ingest.py"),
        ("00fabc", "s3://icestream-bucket/artifacts/icestream_cli.py"),
    ]
    parameters = requests[0]["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"]
    assert "spark.archives=s3://icestream-bucket/artifacts/icestream_env.tar.gz#icestream_env" in parameters
    assert "ICESTREAM_REGION=eu-west-1" in parameters  # from the stack's id


def test_glue_lines_create_the_ingest_job_with_the_stacks_settings(
    stack_json: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        cli.main(["ship", "--target", "glue", "--stack-json", str(stack_json), "--out", str(tmp_path / "g"), *ROLES])
        == 0
    )
    create = next(line for line in _lines(capsys) if line[:3] == ["aws", "glue", "create-job"])
    options = dict(zip(create[3::2], create[4::2], strict=True))
    assert options["--role"] == "arn:aws:iam::123456789012:role/ingest"
    assert json.loads(options["--command"])["ScriptLocation"] == "s3://icestream-bucket/artifacts/ingest.py"
    arguments = json.loads(options["--default-arguments"])
    assert arguments["--ICESTREAM_WAREHOUSE"] == "s3://icestream-bucket/warehouse"
    assert arguments["--extra-py-files"] == "s3://icestream-bucket/artifacts/icestream.zip"


def test_a_missing_stack_value_is_one_line(
    stack_json: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        cli.main(["ship", "--target", "emr-serverless", "--stack-json", str(stack_json), "--out", str(tmp_path)]) == 2
    )
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: no value for IngestJobRole.Arn")
    assert "\n" not in error


@pytest.mark.parametrize(("catalog", "with_aws"), [("jdbc", False), ("glue", True)])
def test_ship_packages_prints_the_lines_coordinates_for_spark_to_resolve(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, catalog: str, with_aws: bool
) -> None:
    from icestream.stack import spark_line

    monkeypatch.setenv("ICESTREAM_CATALOG_TYPE", catalog)
    if catalog == "glue":
        monkeypatch.setenv("ICESTREAM_WAREHOUSE", "s3://bucket/warehouse")
    assert cli.main(["ship", "--packages"]) == 0
    lines = capsys.readouterr().out.splitlines()
    packages = next(line for line in lines if line.startswith("--packages ")).split(" ", 1)[1].split(",")
    line = spark_line()
    assert packages[0] == line.runtime.coordinate
    assert any(coordinate.startswith("org.apache.spark:spark-sql-kafka-0-10_") for coordinate in packages)
    assert any("iceberg-aws-bundle" in coordinate for coordinate in packages) is with_aws
    assert f"--conf spark.jars.packages={','.join(packages)}" in lines
    excluded = [name for package in line.loaded(catalog) for name in package.exclude]
    if excluded:  # what Maven Central lacks of the packages' own needs: left out of Spark's resolution too
        assert f"--exclude-packages {','.join(excluded)}" in lines
        assert f"--conf spark.jars.excludes={','.join(excluded)}" in lines
