"""Spark through Iceberg's GlueCatalog and S3FileIO on a moto server: the ``localstack`` profile for real.

Notebook 00 runs first on that profile (the workbook's set-up and its catalog cell, through Glue). The
set-up, the ingest's exactly-once across a crash at each phase, a second writer's commit, and
expiry and orphan removal on S3 run in a Spark process of their own (``spark_on_glue.py``: its
session loads ``iceberg-aws-bundle``); this test then reads what Spark wrote without Spark, through
pyiceberg's Glue catalog and DuckDB over S3, as notebook 03 does on AWS.

Where moto falls short of Glue (docs/aws.md#tested-against-moto): its ``UpdateTable`` accepts a stale
``VersionId`` (Glue answers ``ConcurrentModificationException``), so two writers racing inside one
commit are not refused there; Iceberg's own check (the base's metadata location against Glue's) is
what the second-writer case exercises. ``test_moto_accepts_a_stale_glue_version`` pins that, so the
day moto enforces it this test says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from icestream.config import load_settings
from icestream.queries import duckdb_engine as duck
from icestream.queries import pyiceberg_engine as ice
from icestream.runtime import aws, catalog
from tests.helpers.moto_server import moto_server
from tests.helpers.notebook_text import output_defects

RUNNER = Path(__file__).with_name("spark_on_glue.py")
BUCKET = "icestream-spark-on-glue"
RUN_SECONDS = 900  # a bound on the Spark process, not a measurement


@pytest.fixture(scope="module")
def endpoint():
    with moto_server() as address:
        yield address


@pytest.fixture(scope="module")
def glue_run(endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, object]:
    """The Spark process's findings, and the settings it ran with."""
    folder = tmp_path_factory.mktemp("spark-on-glue")
    values = {
        "ICESTREAM_PROFILE": "localstack",
        "ICESTREAM_KINESIS_ENDPOINT": endpoint,
        "ICESTREAM_WAREHOUSE": f"s3://{BUCKET}/warehouse",
        "ICESTREAM_JAR_SOURCE": "auto",  # the resolved cache, with the AWS bundle (Glue sessions load it)
        "ICESTREAM_RUN_DIR": str(folder / "run"),
        "ICESTREAM_STREAM_NAME": "spark-on-glue",
        "ICESTREAM_TABLE": "spark_on_glue",
        "ICESTREAM_SHARD_COUNT": "2",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "SPARK_LOCAL_DIRS": str(folder / "spark-local"),
    }
    environment = {**os.environ, **values}
    environment.pop("ICESTREAM_EMULATOR_PORT", None)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in values.items():
            patch.setenv(name, value)
        settings = load_settings()
    # Notebook 00 first, as a learner on this profile runs it: the stream and the tables through Glue,
    # and its check that the session holds the Glue catalog it types (the Spark process's set-up then
    # finds them all there).
    notebook = subprocess.run(
        [sys.executable, "-m", "icestream.cli", "run", "00", "-p", "shard_count", values["ICESTREAM_SHARD_COUNT"],
         "--output", str(folder / "notebooks"), "--no-progress"],
        env=environment, capture_output=True, text=True, timeout=RUN_SECONDS, check=False,
    )  # fmt: skip
    assert notebook.returncode == 0, (
        f"exit {notebook.returncode}:\n{notebook.stdout[-3000:]}\n{notebook.stderr[-3000:]}"
    )
    glue = aws.client(settings, "glue")
    after_00 = {
        "notebook_00": str(folder / "notebooks" / "00_setup.ipynb"),
        "glue_tables_after_00": sorted(
            (table["DatabaseName"], table["Name"], table["Parameters"].get("table_type", ""))
            for database in glue.get_databases()["DatabaseList"]
            for table in glue.get_tables(DatabaseName=database["Name"])["TableList"]
        ),
    }
    done = subprocess.run(
        [sys.executable, str(RUNNER)], env=environment, capture_output=True, text=True, timeout=RUN_SECONDS,
        check=False,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("GLUE-RESULT ")]
    told = f"exit {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, told
    assert lines, told
    return {**json.loads(lines[-1].removeprefix("GLUE-RESULT ")), **after_00}, settings


def test_notebook_00_sets_up_the_lake_through_glue_and_s3(glue_run) -> None:
    """00 on the localstack profile: its tables are Glue's (Iceberg tables there, files in the bucket), its
    catalog cell's check that the session holds the Glue catalog it types passed (the run would have
    failed), and its copy shows a reader nothing raw (``output_defects``)."""
    found, settings = glue_run
    tables = {(database, name): kind for database, name, kind in found["glue_tables_after_00"]}
    for full_name in (settings.table_name, settings.rejects_table_name):
        assert tables.get((settings.namespace, full_name.rpartition(".")[2])) == "ICEBERG", tables
    assert output_defects(Path(found["notebook_00"])) == []


def test_spark_sets_up_ingests_exactly_once_and_maintains_through_glue_and_s3(glue_run) -> None:
    found, _ = glue_run
    assert found["setup"] == 0
    assert found["crashed_at"] == ["before_read", "after_read", "between_commits", "after_commit"]
    assert found["events_expected"] > 0
    assert (found["events_lost"], found["events_written_twice"]) == (0, 0), found
    assert found["rejects"] == found["rejects_expected"] > 0
    assert found["rejects_written_twice"] == 0
    assert found["second_writer_commits"] == 1  # its row is in the table beside the ingest's (one id twice)
    assert found["metadata_location"] == found["glue_metadata_location"]
    assert found["metadata_location"].startswith(f"s3://{BUCKET}/warehouse/")
    assert found["snapshots_after_expiry"] < found["snapshots_before_expiry"]
    assert found["orphans_removed"] == ["orphan-planted-by-the-test.parquet"]
    assert found["orphan_left"] == 0
    assert found["events_after_maintenance"] == found["events_expected"] + 1


def test_pyiceberg_and_duckdb_read_what_spark_wrote(glue_run) -> None:
    found, settings = glue_run
    location = catalog.current_metadata_location(settings)  # Glue's, after the expiry's commit
    table = ice.open_table(settings)
    assert table.metadata_location == location
    rows = table.scan(selected_fields=("event_id",)).to_arrow().num_rows
    assert rows == found["events_after_maintenance"]
    connection = duck.connect(settings)
    try:
        totals = duck.kpi_dashboard(connection, location).totals.iloc[0]
    finally:
        connection.close()
    assert totals["events"] == rows
    glue_table = aws.client(settings, "glue").get_table(DatabaseName=settings.namespace, Name=settings.table)
    assert glue_table["Table"]["Parameters"]["table_type"] == "ICEBERG"


def test_moto_accepts_a_stale_glue_version(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    settings = load_settings(profile="localstack", kinesis_endpoint=endpoint, warehouse=f"s3://{BUCKET}/w")
    glue = aws.client(settings, "glue")
    glue.create_database(DatabaseInput={"Name": "moto_versions"})
    glue.create_table(DatabaseName="moto_versions", TableInput={"Name": "t", "Parameters": {"metadata_location": "a"}})
    version = glue.get_table(DatabaseName="moto_versions", Name="t")["Table"]["VersionId"]
    for location in ("b", "c"):  # the second update names the version the first one replaced
        table = {"Name": "t", "Parameters": {"metadata_location": location}}
        glue.update_table(DatabaseName="moto_versions", TableInput=table, VersionId=version)
    current = glue.get_table(DatabaseName="moto_versions", Name="t")["Table"]["Parameters"]["metadata_location"]
    assert current == "c", "moto now refuses a stale VersionId: Glue's commit lock can be tested (see the docstring)"
