"""The reference job (``jobs/kinesis_to_iceberg.py``) submitted to the standalone cluster with ``spark-submit``.

Spark's own session, the master, Iceberg's runtime and the catalog all come from ``spark-submit``'s
command line; icestream only provides the source, shipped to the workers (whose Python lacks
icestream and boto3) as the packed environment. The first submission is SIGKILLed by the source's
crash drill once Spark has written batch 0's offsets, so the second submission replays that batch
with no records shipped from the driver: its tasks read the shards again on the executors.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections import Counter
from pathlib import Path

from icestream.config import load_settings
from icestream.kinesis.clients import ensure_stream, kinesis_connection
from icestream.kinesis_source.crash_drill import ENV as CRASH
from icestream.runtime.jars import resolve_jars
from icestream.runtime.shipping import ENV_ALIAS, ShipPlan, submit_arguments
from icestream.runtime.spark import catalog_conf
from icestream.runtime.standalone import StandaloneCluster, spark_home
from tests.cluster.conftest import DRIVER_TIMEOUT, run_driver
from tests.helpers.streams import mixed_records, put, send_aggregated, stream_user_records
from tests.helpers.streams import user_records as kpl_records

JOB = Path(__file__).resolve().parents[2] / "lib" / "icestream" / "jobs" / "kinesis_to_iceberg.py"
EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def test_the_reference_job_on_the_cluster_replays_a_killed_batch_on_the_executors_exactly_once(
    spark, driver_env, spark_cluster: StandaloneCluster, shipped: ShipPlan, emulator: str, tmp_path: Path
) -> None:
    made = load_settings(stream_name=f"csrc-{uuid.uuid4().hex[:8]}")
    ensure_stream(made, shard_count=2)
    records, _, _ = mixed_records(0, 200)
    put(made, records)
    send_aggregated(made, kpl_records(2_000, 20), per_aggregate=5)
    table = f"{made.catalog}.{made.namespace}.csrc_{made.stream_name[-8:]}"
    checkpoint = tmp_path / "checkpoint"
    conf = {**catalog_conf(made), "spark.sql.extensions": EXTENSIONS}
    command = [
        str(spark_home() / "bin" / "spark-submit"), "--master", spark_cluster.master_url,
        "--jars", ",".join(str(path) for path in resolve_jars(made).jars),
        *[argument for key, value in conf.items() for argument in ("--conf", f"{key}={value}")],
        *submit_arguments(shipped), str(JOB),
        "--stream", made.stream_name, "--region", made.region, "--endpoint-url", kinesis_connection(made).endpoint,
        "--starting-position", "trim_horizon", "--table", table, "--checkpoint", str(checkpoint), "--available-now",
    ]  # fmt: skip
    env = driver_env(made)
    del env["ICESTREAM_SPARK_MASTER"]  # Spark's own session: everything from spark-submit
    before = {path for path in spark_cluster.folder.glob("worker-*/app-*/*") if path.is_dir()}

    drilled = {**env, CRASH: "partitions:1", f"{CRASH}_DIR": str(tmp_path / "drill")}
    log = (tmp_path / "killed.log").open("w")
    # The drill kills its process group: the job leads a group of its own, named to it by the shell's $$.
    killed = subprocess.run(
        ["bash", "-c", f'{CRASH}_GROUP=$$ exec "$@"', "job", *command], env=drilled, stdout=log, stderr=log,
        stdin=subprocess.DEVNULL, cwd=tmp_path, timeout=DRIVER_TIMEOUT, start_new_session=True,
    )  # fmt: skip
    log.close()
    assert killed.returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
    assert (checkpoint / "offsets" / "0").exists()
    assert not (checkpoint / "commits" / "0").exists()

    result = run_driver(command, env, tmp_path / "submit.log")
    assert result.returncode == 0, result.stderr[-3000:]

    spark.sql(f"REFRESH TABLE {table}")
    rows = spark.table(table).collect()
    assert Counter((row.shard_id, row.sequence_number) for row in rows) == Counter(
        (shard, sequence) for (shard, sequence, _), count in stream_user_records(made).items() for _ in range(count)
    )
    assert any(row.event_id is None and row.raw.startswith('{"event_id": "broken') for row in rows)
    executors = {path for path in spark_cluster.folder.glob("worker-*/app-*/*") if path.is_dir()} - before
    assert {folder.parent.parent.name for folder in executors} == {"worker-0", "worker-1"}, executors
    assert all((folder / ENV_ALIAS / "bin" / "python").exists() for folder in executors), executors
    assert os.listdir(tmp_path / "drill") == ["partitions-1"]
