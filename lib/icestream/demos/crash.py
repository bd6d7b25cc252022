"""Exactly-once you can watch: the ingest as its own process, SIGKILLed inside a batch, restarted (notebook 02).

:func:`crash_demo` makes a 2-shard stream of its own, ``<stream>-crash-demo``, and the table
``<table>_crash_demo`` (with its rejects table) anew, sends a known set of records to it (events,
repeats of some, a few malformed ones) and returns a :class:`CrashDemo`: what was sent, the settings
an ingest of the demo runs with, and the environment in which ``icestream ingest`` works on them. The
notebook starts that command itself, waits for the line its ``--pause-at`` prints
(:func:`wait_for_pause`), kills the process group with SIGKILL, restarts the ingest to the end (in its
own session: ``start_ingest(spark, demo.settings, available_now=True)``, as a scheduled job would;
a second process would only add a JVM start) and compares, per event id, what was sent with what the
table holds (:meth:`CrashDemo.compare`). The demo's ingests write their progress (and the process
Spark's scratch) under ``<run_dir>/crash_demo``, so nothing of the demo mixes with the main ingest's
files. It runs on the local emulator only (on AWS it would create a stream).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from icestream.config import CRASH_DEMO_SUFFIX
from icestream.demos.routed_demo import start_afresh
from icestream.errors import IngestError
from icestream.kinesis.clients import resolve_endpoint
from icestream.lake.demo_tables import demo_mark
from icestream.lake.statement import Statement, statements_hidden
from icestream.lake.table import LakeTable, setup_tables
from icestream.producer.put import produce
from icestream.synthetic.generator import backfill_config, generate
from icestream.synthetic.kinds import VALID_KINDS

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

    from icestream.config import Settings

DEMO_SUFFIX = CRASH_DEMO_SUFFIX
RUN_FOLDER = "crash_demo"  # under run_dir: the demo's ingest progress and Spark scratch
END = datetime(2026, 11, 21, tzinfo=UTC)  # the demo's hour of event time ends here (runs read alike)


@dataclass(frozen=True)
class CrashDemo:
    """The demo's names, what the producer sent, and how to run ``icestream ingest`` on them."""

    settings: Settings  # the demo's stream, tables, run folder and endpoint: what its ingests run with
    sent: pd.DataFrame  # one row per record Kinesis accepted: kind, event_id (None for a malformed one)
    environment: dict[str, str]  # the ingest process's environment: the demo's settings as ICESTREAM_*
    source: str | None = None  # the source its tables record (a Kafka topic's kafka:<topic>); None: the stream

    def command(self, *options: str) -> list[str]:
        """``icestream ingest <options>`` as this Python runs it (the venv's ``icestream`` script does the same)."""
        return [sys.executable, "-m", "icestream.cli", "ingest", *options]

    def shell_command(self, *options: str) -> str:
        """``icestream ingest <options>`` as a shell line that does what :meth:`command` does in
        :attr:`environment`: led by the ``ICESTREAM_*`` variables whose value differs from what
        ``icestream`` loads in this process's environment (the demo's stream, tables, run folder, endpoint)."""
        import shlex

        from icestream.config import load_settings

        here = _variables(load_settings())
        changed = [
            f"{name}={shlex.quote(value)}"
            for name, value in self.environment.items()
            if name in here and here[name] != value
        ]
        return " ".join([*changed, shlex.join(["icestream", "ingest", *options])])

    def positions(self, spark: SparkSession) -> pd.DataFrame:
        """Where each of the demo's tables stands now: per shard its committed position, with the batch id
        and total rows of the table's newest snapshot (read fresh: another process commits)."""
        import pandas as pd

        from icestream.ingest.positions import load_committed  # as queries.committed_positions reads them

        rows = []
        for name in (self.settings.table_name, self.settings.rejects_table_name):
            table = LakeTable(spark, name, echo=False)
            table.apply(Statement(f"REFRESH TABLE {table.name}"))
            snapshots = table.inspect.snapshots()
            batch, total = snapshots.iloc[-1][["batch_id", "total_records"]] if len(snapshots) else (None, 0)
            committed = load_committed(spark, name, self.source or self.settings.stream_name)
            rows += [
                {
                    "table": name.rsplit(".", 1)[-1],
                    "shard": shard,
                    "position": position,
                    "last batch": batch,
                    "rows": total,
                }
                for shard, position in sorted(committed.positions.items())
            ]
        return pd.DataFrame(rows, columns=["table", "shard", "position", "last batch", "rows"])

    def compare(self, spark: SparkSession) -> pd.DataFrame:
        """Per event id, what the producer sent against what the events table holds now.

        ``lost`` = ids sent that are not in the table; ``duplicated`` = rows - distinct ids in the
        table; ``unexpected`` = ids in the table that were never sent.
        """
        import pandas as pd

        table = LakeTable(spark, self.settings.table_name)
        table.apply(Statement(f"REFRESH TABLE {table.name}"))  # another process committed
        held = table.run(Statement(f"SELECT event_id FROM {table.name}")).toPandas()["event_id"]
        sent_ids = set(self.sent["event_id"].dropna())
        held_ids = set(held)
        figures = {
            "records sent": len(self.sent),
            "malformed records sent": int(self.sent["event_id"].isna().sum()),
            "repeats sent (an id sent again)": int(self.sent["event_id"].notna().sum()) - len(sent_ids),
            "distinct event ids sent": len(sent_ids),
            "rows in the table": len(held),
            "distinct event ids in the table": len(held_ids),
            "lost (sent, not in the table)": len(sent_ids - held_ids),
            "duplicated (rows - distinct ids)": len(held) - len(held_ids),
            "unexpected (in the table, never sent)": len(held_ids - sent_ids),
        }
        return pd.Series(figures, dtype="int64").to_frame("value")


def crash_demo_settings(settings: Settings) -> Settings:
    """The demo's stream ``<stream>-crash-demo`` and tables ``<table>_crash_demo`` (and its ``_rejects``)."""
    return replace(settings.companion(DEMO_SUFFIX), stream_name=f"{settings.stream_name}-crash-demo")


def crash_demo(spark: SparkSession, settings: Settings, records: int = 1200, seed: int = 29) -> CrashDemo | None:
    """Make the demo's stream and tables anew and send ``records`` records of one hour of events to it.

    Args:
        spark: The session (drops and creates the demo's tables).
        settings: The workbook's settings (see :func:`crash_demo_settings` for the demo's names).
        records: Records to send in all, exactly (events, repeats of some, about 1% malformed).
        seed: The generator's seed: the same records every run.

    Returns:
        The demo, or None (nothing made or sent) when Kinesis is not an emulator.

    Raises:
        IngestError: If Kinesis did not accept every record.
    """
    if not settings.is_local_endpoint:
        return None
    import pandas as pd

    demo = crash_demo_settings(settings)
    with statements_hidden():  # the demo's own tables, made again: plumbing, not the lesson
        start_afresh(spark, demo, DEMO_SUFFIX)
        setup_tables(spark, demo, demo_mark(DEMO_SUFFIX))
    folder = settings.path("run_dir") / RUN_FOLDER
    shutil.rmtree(folder, ignore_errors=True)  # a killed Spark leaves its scratch (about 100 MiB) behind
    (folder / "spark-local").mkdir(parents=True)
    generated, _ = generate(
        backfill_config(hours=1, records=records, end=END, seed=seed, bad_rate=0.01, duplicate_rate=0.02)
    )
    summary = produce(demo, generated, progress=False)
    if summary.sent != len(generated):
        raise IngestError(f"crash demo: Kinesis accepted {summary.sent} of {len(generated)} records; run it again.")
    sent = pd.DataFrame(
        {
            "kind": [record.kind for record in generated],
            "event_id": [record.event_id if record.kind in VALID_KINDS else None for record in generated],
        }
    )
    return CrashDemo(ingest_settings(demo, folder), sent, ingest_environment(demo, folder))


def ingest_settings(demo: Settings, folder: Path) -> Settings:
    """The demo's settings with its run folder ``folder`` and the endpoint resolved (for ``start_ingest``)."""
    # The endpoint is found through the workbook's run_dir (the emulator's file), so it is resolved
    # before the demo's run folder takes that place.
    return replace(demo, run_dir=str(folder), kinesis_endpoint=resolve_endpoint(demo))


def ingest_environment(demo: Settings, folder: Path, kinesis: bool = True) -> dict[str, str]:
    """The demo's settings as ``ICESTREAM_*`` variables, run files in ``folder``, the endpoint resolved
    (``kinesis`` False: a demo on Kafka, whose settings name the broker's address already)."""
    import os

    values = _variables(demo)
    values["ICESTREAM_RUN_DIR"] = str(folder)
    if kinesis:
        values["ICESTREAM_KINESIS_ENDPOINT"] = _text(resolve_endpoint(demo))  # found through the workbook's run_dir
    # A SIGKILLed Spark leaves its temporary folder behind: keep it where the next run removes it.
    values["SPARK_LOCAL_DIRS"] = str(folder / "spark-local")
    return {**os.environ, **values}


def _text(value: Any) -> str:
    """A setting's value as an ``ICESTREAM_*`` variable holds it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return "none" if value is None else str(value)


def _variables(settings: Settings) -> dict[str, str]:
    """The settings as ``ICESTREAM_*`` variables (all but ``sources``, which has no variable form)."""
    values = {f"ICESTREAM_{item.name.upper()}": _text(getattr(settings, item.name)) for item in fields(settings)}
    values.pop("ICESTREAM_SOURCES", None)
    return values


def wait_for_pause(process: subprocess.Popen[str], timeout: float = 180.0) -> list[str]:
    """Read the ingest process's output until the line ``--pause-at`` prints; return the lines read.

    Args:
        process: Started with ``stdout=subprocess.PIPE``, text mode, ``stderr`` into ``stdout``.
        timeout: Seconds to wait for the pause.

    Raises:
        IngestError: If the process ended (or the time passed) before it paused, with its last lines.
    """
    import queue
    import threading

    from icestream.ingest.crash_drill import PAUSE_MARK

    if process.stdout is None:
        raise IngestError("wait_for_pause: start the process with stdout=subprocess.PIPE.")
    lines: queue.Queue[str | None] = queue.Queue()

    def read(stream: IO[str]) -> None:  # a thread: readline blocks, and the wait must not
        for line in stream:
            lines.put(line.rstrip("\n"))
            if line.startswith(PAUSE_MARK):
                return  # the rest of the output is nobody's concern: the process is about to be killed
        lines.put(None)  # its output closed: it ended

    threading.Thread(target=read, args=(process.stdout,), daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if line.startswith(PAUSE_MARK):
            return seen
    tail = "\n".join(seen[-15:])
    raise IngestError(f"the ingest process did not pause (exit status {process.poll()}); its last lines:\n{tail}")


def processes_in_group(group: int, wait: float = 0.0) -> list[int]:
    """The pids of the processes still in process group ``group`` (from ``/proc``; a zombie counts as gone).

    Args:
        group: The process group id (a process started with ``start_new_session=True``: its pid).
        wait: Seconds to wait for the group to empty (a SIGKILLed JVM takes a moment to go).
    """
    deadline = time.monotonic() + wait
    while True:
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields_after_name = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # ended while we looked
            if int(fields_after_name[2]) == group and fields_after_name[0] != "Z":
                pids.append(int(stat.parent.name))
        if not pids or time.monotonic() >= deadline:
            return sorted(pids)
        time.sleep(0.1)
