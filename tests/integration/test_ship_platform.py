"""The EMR Serverless upload folder works on its own: the packed environment runs the stamped entry points."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from icestream import cli
from icestream.config import Settings
from icestream.runtime.build_stamp import STAMP_LINE, build_id

TARGET_PYTHON = Path("/usr/bin/python3.11")  # where EMR 7.1+ images have Python 3.11, and Debian 12 too
STACK_VALUES = {
    "WarehouseBucket": "bucket", "ArtifactsPrefix": "artifacts", "ApplicationId": "app", "WarehousePrefix": "w",
    "IngestJobRole.Arn": "arn:aws:iam::1:role/i", "MaintenanceJobRole.Arn": "arn:aws:iam::1:role/m",
    "StreamName": "s", "Namespace": "n", "DataKey.Arn": "arn:aws:kms:eu-west-1:1:key/k", "AWS::Region": "eu-west-1",
}  # fmt: skip
VALUES = [part for name, value in STACK_VALUES.items() for part in ("--value", f"{name}={value}")]


@pytest.mark.skipif(not TARGET_PYTHON.exists(), reason="the packed environment links /usr/bin/python3.11")
def test_the_packed_environment_runs_its_stamped_entry_points_alone(settings: Settings, tmp_path: Path) -> None:
    out = tmp_path / "upload"
    assert cli.main(["ship", "--target", "emr-serverless", "--out", str(out), *VALUES]) == 0
    unpacked = tmp_path / "icestream_env"  # what spark.archives unpacks in the job's working directory
    with tarfile.open(out / "icestream_env.tar.gz") as archive:
        archive.extractall(unpacked, filter="tar")
    python = unpacked / "bin" / "python"
    assert python.resolve() == TARGET_PYTHON.resolve()
    for entry_point in ("ingest.py", "icestream_cli.py"):
        ran = subprocess.run([str(python), entry_point, "--help"], capture_output=True, text=True, cwd=out)
        assert ran.returncode == 0, ran.stderr  # icestream and its core are inside, and it is the same build
        assert "usage:" in ran.stdout
    stale = out / "stale.py"
    stale.write_text((out / "ingest.py").read_text().replace(repr(build_id()), repr("0.0.1+000000000000")))
    assert STAMP_LINE not in stale.read_text()
    refused = subprocess.run([str(python), stale.name, "--help"], capture_output=True, text=True, cwd=out)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: this entry point was shipped with icestream 0.0.1+000000000000")
