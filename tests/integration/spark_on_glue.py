"""Spark through Iceberg's GlueCatalog and S3FileIO, as its own process: ``python tests/integration/spark_on_glue.py``.

The test session's SparkSession runs the JDBC catalog; a session on Glue loads ``iceberg-aws-bundle``,
which a running JVM cannot add, so this runs in a process of its own (test_spark_on_glue.py starts it
with the ``localstack`` profile pointed at a moto server). It does what a user of that profile does,
through Spark alone, and prints one JSON line of what it found:

1. ``icestream setup``: the stream, then the events and rejects tables through GlueCatalog (metadata
   in Glue, files in the emulated bucket through S3FileIO);
2. the ingest, crashed at each phase of a batch (a fault hook, no retry) and drained, the records
   sent between the crashes: every event once, every malformed record in the rejects once;
3. a second writer's commit between two of the ingest's: the ingest's next commit starts from a
   table version Glue no longer holds, retries on the new one, and neither is lost;
4. ``expire_snapshots`` and ``remove_orphan_files`` (listing the table's prefix through S3FileIO)
   on S3, with an orphan planted in the table's data folder.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.helpers, from a process of its own

PHASES = ("before_read", "after_read", "between_commits", "after_commit")
ORPHAN = "data/orphan-planted-by-the-test.parquet"


def main() -> int:
    import boto3

    from icestream import cli
    from icestream.config import load_settings
    from icestream.errors import IngestError
    from icestream.ingest.query import start_ingest
    from icestream.lake.inspect import load_iceberg_table
    from icestream.lake.table import LakeTable
    from icestream.runtime.spark import get_spark
    from tests.helpers.crash import crash_at
    from tests.helpers.ingest import drain, table_state
    from tests.helpers.streams import mixed_records, put

    settings = load_settings()
    found: dict[str, object] = {"setup": cli.main(["setup"])}
    spark = get_spark(settings, app_name="icestream-spark-on-glue")
    good: set[str] = set()
    malformed_sent = 0
    crashed = []
    for number, phase in enumerate(PHASES):
        records, ids, malformed = mixed_records(number * 1000, 60)
        put(settings, records)
        good |= ids
        malformed_sent += malformed
        query = start_ingest(
            spark, settings, available_now=True, trigger_seconds=0, max_records_per_shard=25, batch_retries=0,
            fault_hook=crash_at(phase, batch=None if number == 0 else number), progress_file=None,
        )  # fmt: skip
        try:
            query.await_termination(timeout=300)
        except IngestError as error:
            crashed.append(phase if "SimulatedCrashError" in str(error) else f"{phase}: {error}")
    # A second writer (a session of its own, its own catalog) commits to the events table between the
    # ingest's rejects commit and its events commit: the ingest's commit then starts from a table
    # version Glue no longer holds, and must retry on the new one, keeping both.
    records, ids, malformed = mixed_records(9000, 60)
    put(settings, records)
    good |= ids
    malformed_sent += malformed
    other = spark.newSession()
    other_rows = other.table(settings.table_name).limit(1)
    interleaved = []

    def second_writer(phase: str, batch_id: int) -> None:
        if phase == "between_commits" and not interleaved:
            other_rows.writeTo(settings.table_name).append()  # one row again: an id written twice, on purpose
            interleaved.append(batch_id)

    query = start_ingest(
        spark, settings, available_now=True, trigger_seconds=0, max_records_per_shard=25, fault_hook=second_writer
    )
    query.await_termination(timeout=300)
    found["second_writer_commits"] = len(interleaved)
    drain(spark, settings)
    events, rejects = table_state(spark, settings)
    found |= {
        "crashed_at": crashed,
        "events_expected": len(good),
        "events_lost": len(good - set(events)),
        # the second writer's row is an event id written twice, on purpose: counted apart
        "events_written_twice": sum(count - 1 for count in events.values()) - 1,
        "rejects_expected": malformed_sent,
        "rejects": sum(rejects.values()),
        "rejects_written_twice": sum(count - 1 for count in rejects.values()),
    }
    table = LakeTable(spark, settings.table_name)
    location, _ = table.inspect.metadata_location()
    found["metadata_location"] = location
    glue = boto3.client("glue", endpoint_url=settings.glue_endpoint, region_name=settings.region)
    entry = glue.get_table(DatabaseName=settings.namespace, Name=settings.table)["Table"]
    found["glue_metadata_location"] = entry["Parameters"]["metadata_location"]
    found["snapshots_before_expiry"] = spark.table(f"{settings.table_name}.snapshots").count()
    now = datetime.now(UTC) + timedelta(seconds=1)
    table.maintenance.expire_snapshots(now, retain_last=1, keep_positions_of=settings.stream_name)
    spark.sql(f"REFRESH TABLE {settings.table_name}")
    found["snapshots_after_expiry"] = spark.table(f"{settings.table_name}.snapshots").count()
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    table_prefix = prefix.rsplit("/metadata/", 1)[0]
    s3 = boto3.client("s3", endpoint_url=settings.s3_endpoint, region_name=settings.region)
    s3.put_object(Bucket=bucket, Key=f"{table_prefix}/{ORPHAN}", Body=b"not referenced by any snapshot")
    # The procedure (LakeTable.maintenance.remove_orphan_files) refuses files younger than 24 hours, and moto
    # dates an object when it is put: Iceberg's action runs the same listing and deletion without that floor.
    later = int((datetime.now(UTC) + timedelta(minutes=1)).timestamp() * 1000)
    jvm = spark.sparkContext._jvm
    action = jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    iceberg = load_iceberg_table(spark, settings.table_name)
    removed = action.deleteOrphanFiles(iceberg).olderThan(later).usePrefixListing(True).execute()
    found["orphans_removed"] = sorted(str(path).rsplit("/", 1)[-1] for path in removed.orphanFileLocations())
    listing = s3.list_objects_v2(Bucket=bucket, Prefix=f"{table_prefix}/{ORPHAN}")
    found["orphan_left"] = listing.get("KeyCount", 0)
    spark.sql(f"REFRESH TABLE {settings.table_name}")
    found["events_after_maintenance"] = spark.table(settings.table_name).count()
    print("GLUE-RESULT " + json.dumps(found), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
