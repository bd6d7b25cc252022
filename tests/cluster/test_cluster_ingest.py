"""The ingest on a Spark standalone cluster whose workers' Python lacks icestream.

Each test runs its drivers as subprocesses against the session's cluster (see conftest), then
checks the tables with this process's local session against what the producer sent
(``tests.reliability.workload``): every event id once, every malformed record once, nothing else.
"""

from __future__ import annotations

import signal
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from icestream.runtime.jars import resolve_jars
from icestream.runtime.shipping import ENV_ALIAS, ShipPlan, submit_arguments
from icestream.runtime.standalone import StandaloneCluster, spark_home
from icestream.synthetic.generator import backfill_config
from tests.cluster.conftest import DRIVER_TIMEOUT, run_driver
from tests.conftest import generated_table
from tests.helpers.waiting import wait_until
from tests.reliability.faultproxy import FaultProxy
from tests.reliability.figures import FULL
from tests.reliability.ingest_runner import running
from tests.reliability.workload import Workload, verify

JOB = Path(__file__).resolve().parents[2] / "lib" / "icestream" / "jobs" / "ingest.py"


def _executor_folders(cluster: StandaloneCluster) -> set[Path]:
    """Every executor's working directory so far (``worker-N/app-.../<executor id>``)."""
    return set(cluster.folder.glob("worker-*/app-*/*/"))


def _phases(log: Path) -> list[tuple[float, str, int]]:
    """The runner's phase log: (time, phase, batch id) per line."""
    if not log.exists():
        return []
    rows = [line.split() for line in log.read_text().splitlines() if line.strip()]
    return [(float(when), phase, int(batch)) for when, phase, batch in rows]


def test_without_shipping_the_ingest_and_doctor_say_so_in_one_line(fresh, driver_env, tmp_path: Path) -> None:
    made = fresh(shards=1, prefix="noship")
    Workload(made).send(50)
    env = driver_env(made, ICESTREAM_SHIP="none")

    ingest = run_driver([sys.executable, "-m", "icestream.cli", "ingest", "--available-now"], env, tmp_path / "i.log")
    errors = [line for line in ingest.stderr.splitlines() if line.startswith("error:")]
    assert ingest.returncode == 2, ingest.stderr[-3000:]
    assert len(errors) == 1, ingest.stderr[-3000:]
    assert "cannot import 'icestream'" in errors[0]
    assert "ICESTREAM_SHIP=packed" in errors[0]
    assert "Traceback" not in ingest.stderr, "a worker traceback reached the user"

    doctor = run_driver([sys.executable, "-m", "icestream.cli", "doctor"], env, tmp_path / "doctor.log")
    failures = [line for line in doctor.stdout.splitlines() if line.startswith("FAIL")]
    assert doctor.returncode == 1
    assert len(failures) == 1, doctor.stdout
    assert failures[0].startswith("FAIL executors")
    assert "cannot import icestream" in failures[0]
    assert "ICESTREAM_SHIP=packed" in failures[0]


def test_a_driver_killed_mid_stream_restarts_exactly_once_as_a_spark_submit_job(
    spark, fresh, driver_env, spark_cluster: StandaloneCluster, shipped: ShipPlan, settings, tmp_path: Path
) -> None:
    """A driver SIGKILLed between its two commits, then the job resubmitted as a scheduler would:
    ``spark-submit`` of ``jobs/ingest.py`` with the shipped environment drains the stream exactly once.
    (One test for both: each driver on the cluster costs a JVM and an application.)"""
    made = fresh(shards=2, prefix="drvkill")
    phase_log = tmp_path / "phases.log"
    env = driver_env(
        made,
        RELIABILITY_PHASE_LOG=str(phase_log),
        RELIABILITY_KILL_PHASE="between_commits",  # rejects committed, events not: the hardest moment
        RELIABILITY_KILL_BATCH="2",
        RELIABILITY_MAX_RECORDS="100",
        RELIABILITY_TRIGGER="0.5",
    )
    workload = Workload(made).start(per_call=10, interval=0.3)
    try:
        with running(env, tmp_path / "killed.log") as driver:
            driver.wait(timeout=DRIVER_TIMEOUT)  # it SIGKILLs itself at the phase
    finally:
        workload.stop()
    assert driver.returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
    assert _phases(phase_log)[-1][1] == "between_commits"
    workload.send(1_500)  # more than one batch's worth behind the crash

    before = _executor_folders(spark_cluster)
    jars = ",".join(str(path) for path in resolve_jars(settings).jars)
    command = [
        str(spark_home() / "bin" / "spark-submit"), "--master", spark_cluster.master_url, "--jars", jars,
        *submit_arguments(shipped), str(JOB), "--available-now", "--trigger", "0", "--max-records-per-shard", "500",
    ]  # fmt: skip
    # The master comes from spark-submit and Iceberg from its --jars: icestream adds only its catalog.
    submit_env = driver_env(made, ICESTREAM_JAR_SOURCE="provided")
    del submit_env["ICESTREAM_SPARK_MASTER"]
    result = run_driver(command, submit_env, tmp_path / "submit.log")
    assert result.returncode == 0, result.stderr[-3000:]

    verdict = verify(spark, made, workload.ledger)
    assert verdict.exact, verdict
    assert verdict.events > 1_500
    assert verdict.malformed > 0
    executors = _executor_folders(spark_cluster) - before
    assert len({folder.parent.name for folder in executors}) == 1, "one application on the cluster's workers"
    assert len({folder.parent.parent.name for folder in executors}) == 2, "executors on both workers"
    assert all((folder / ENV_ALIAS / "bin" / "python").exists() for folder in executors), executors


def test_a_worker_killed_while_a_batch_reads_loses_and_duplicates_nothing(
    spark, fresh, driver_env, spark_cluster: StandaloneCluster, emulator: str, tmp_path: Path
) -> None:
    made = fresh(shards=2, prefix="wrkkill")
    workload = Workload(made)
    workload.send(1_200)
    phase_log = tmp_path / "phases.log"
    # Every GetRecords waits 2 s in the proxy, so a read task is surely running when the worker dies.
    with FaultProxy(emulator, operations=("GetRecords",), delay_seconds=2.0) as proxy:
        env = driver_env(
            made,
            ICESTREAM_KINESIS_ENDPOINT=proxy.endpoint,
            RELIABILITY_PHASE_LOG=str(phase_log),
            RELIABILITY_AVAILABLE_NOW="1",
            RELIABILITY_MAX_RECORDS="250",
            RELIABILITY_TRIGGER="0",
        )
        try:
            with running(env, tmp_path / "driver.log") as driver:

                def reading_batch_2() -> bool:
                    assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
                    return sum(phase == "before_read" for _, phase, _ in _phases(phase_log)) >= 2

                wait_until(reading_batch_2, DRIVER_TIMEOUT, interval=0.05, message="the driver to read batch 2")
                calls = proxy.requests["GetRecords"]
                # A read task's GetRecords has reached the proxy, which holds it 2 s: the kill lands mid-read.
                wait_until(lambda: proxy.requests["GetRecords"] > calls, 120, interval=0.02, message="a GetRecords")
                killed_at = time.time()
                spark_cluster.kill_worker(0)
                assert driver.wait(timeout=DRIVER_TIMEOUT) == 0, (tmp_path / "driver.log").read_text()[-3000:]
                alive_after_kill = spark_cluster.alive_workers()
        finally:
            spark_cluster.start_worker(0, timeout=120)  # the next tests get two workers again

    phases = _phases(phase_log)
    reading = [batch for when, phase, batch in phases if phase == "before_read" and when < killed_at][-1]
    finished = [when for when, phase, batch in phases if phase == "after_read" and batch == reading]
    assert finished, phases
    assert finished[0] > killed_at, f"the kill did not land during batch {reading}'s read: {phases}"
    assert alive_after_kill == 1
    verdict = verify(spark, made, workload.ledger)
    assert verdict.exact, verdict
    assert verdict.events == 1_200


@pytest.mark.skipif(
    not FULL, reason="5 minutes of drivers on the cluster: `make reliability` runs it (ICESTREAM_RELIABILITY=full)"
)
def test_query_notebooks_run_with_their_drivers_on_the_cluster(
    spark, driver_env, spark_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    """Notebooks 03, 04, 06, 08 and 09 against a table with two hours of history, each notebook's kernel
    (``--kernel-per-notebook``) a driver on the cluster."""
    end = datetime.now(UTC).replace(microsecond=0)
    config = backfill_config(hours=2, count=6_000, end=end, seed=13)
    with generated_table(spark, "nbcluster", config, 3_000) as (made, _name, _records, counts):
        before = _executor_folders(spark_cluster)
        output = tmp_path / "executed"
        command = [
            sys.executable, "-m", "icestream.cli", "run", "03", "04", "06", "08", "09", "--kernel-per-notebook",
            "--output", str(output),
            "--no-progress", "-p", "score_start", (end - timedelta(minutes=60)).isoformat(),
            "-p", "score_end", end.isoformat(), "-p", "orphan_dry_run", "true",
        ]  # fmt: skip
        result = run_driver(command, driver_env(made), tmp_path / "notebooks.log", drivers=4)
        assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
        applications = {folder.parent.name for folder in _executor_folders(spark_cluster) - before}
        executed = sorted(path.name[:2] for path in output.glob("*.ipynb"))
        rows = spark.table(_name).count()
    assert executed == ["03", "04", "06", "08", "09"]
    assert len(applications) == 4, f"one application per notebook on the cluster: {sorted(applications)}"
    assert rows == counts["written"], "the notebooks and 09's maintenance kept every row, added none"
