"""A second or third writer process for the concurrent-writers campaign.

``python tests/reliability/writer_runner.py maintain|append`` runs for ``WRITER_SECONDS`` with
settings from ``ICESTREAM_*`` and writes what it did as JSON to ``WRITER_RESULT``:

- ``maintain``: loops compaction (binpack), manifest rewrite and snapshot expiry (keeping the
  ingest's positions) on the events table, as notebook 09 does while the ingest runs, or on the
  tables ``WRITER_TABLES`` names (bare names, comma-separated: the events table and its companions);
- ``append``: appends small batches to another table (``WRITER_TABLE``) and records the snapshot id
  each append committed, so the campaign can check that every commit it was told about is there.

A failed commit is counted (with its exception's class), never hidden: a conflict Iceberg could not
resolve by its own retries shows up here as ``failed``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def conflict_name(error: BaseException) -> str:
    """The Java or Python exception class behind a failed commit, for the report."""
    text = str(error)
    for name in ("CommitFailedException", "ValidationException", "CommitStateUnknownException", "SQLITE_BUSY"):
        if name in text:
            return name
    return type(error).__name__


def maintain(spark: Any, settings: Any, seconds: float) -> dict[str, Any]:
    from icestream.lake.table import LakeTable

    # The events table, or the bare names in WRITER_TABLES (e.g. the events table and its metrics table).
    names = [name for name in os.environ.get("WRITER_TABLES", "").split(",") if name] or [settings.table]
    done: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    steps = {}
    for name in names:
        table = LakeTable(spark, dataclasses.replace(settings, table=name).table_name)
        suffix = "" if name == settings.table else f" ({name})"
        steps.update({
            f"rewrite_data_files{suffix}": lambda table=table: table.maintenance.rewrite_data_files(
                "binpack", options={"min-input-files": 2}),
            f"rewrite_manifests{suffix}": table.maintenance.rewrite_manifests,
            f"expire_snapshots{suffix}": lambda table=table: table.maintenance.expire_snapshots(
                older_than=datetime.now(UTC), retain_last=5, keep_positions_of=settings.stream_name
            ),
        })  # fmt: skip
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name, step in steps.items():
            try:
                step()
                done[name] += 1
            except Exception as error:  # noqa: BLE001 - counted and reported, the loop goes on
                failed[f"{name}: {conflict_name(error)}"] += 1
        time.sleep(0.5)  # pacing between maintenance rounds, not a wait for anything
    return {"done": dict(done), "failed": dict(failed)}


def append(spark: Any, settings: Any, seconds: float) -> dict[str, Any]:
    from icestream.lake.inspect import load_iceberg_table

    name = f"{settings.catalog}.{settings.namespace}.{os.environ['WRITER_TABLE']}"
    committed: list[int] = []
    rows = 0
    failed: Counter[str] = Counter()
    number = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        frame = spark.range(number, number + 50).selectExpr("id", "current_timestamp() AS written_at")
        try:
            frame.writeTo(name).append()
        except Exception as error:  # noqa: BLE001 - counted and reported
            failed[conflict_name(error)] += 1
        else:
            committed.append(int(load_iceberg_table(spark, name).currentSnapshot().snapshotId()))
            rows += 50
        number += 50
        time.sleep(0.2)  # pacing between appends, not a wait for anything
    return {"committed_snapshots": committed, "rows": rows, "failed": dict(failed)}


def spawn(script: str, args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Run ``script`` (a runner beside this file) as its own process group, output to ``log``.

    Its Spark's temporary folder goes beside the log (see ``ingest_runner.sigkill_trial``).
    """
    env = {**env, "SPARK_LOCAL_DIRS": str(log.parent / "spark-local")}
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, str(HERE / script), *args], env=env, stdout=output, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip


def finish(process: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
    """Wait for a spawned runner; fail with its log's tail if it runs too long or exits non-zero."""
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        raise AssertionError(f"{log.name}: still running after {timeout:.0f} s:\n{log.read_text()[-2000:]}") from None
    assert code == 0, f"{log.name} exited {code}:\n{log.read_text(errors='replace')[-3000:]}"


def main() -> int:
    from icestream.config import load_settings
    from icestream.runtime.spark import get_spark

    settings = load_settings()
    spark = get_spark(settings, app_name=f"writer-{sys.argv[1]}")
    seconds = float(os.environ.get("WRITER_SECONDS", "30"))
    work = maintain if sys.argv[1] == "maintain" else append
    began = time.monotonic()
    result = work(spark, settings, seconds)
    result["seconds"] = round(time.monotonic() - began, 1)
    Path(os.environ["WRITER_RESULT"]).write_text(json.dumps(result))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
