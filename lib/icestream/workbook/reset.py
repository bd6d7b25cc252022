"""Start the workbook over: drop its tables, recreate its stream, clear its run state.

``icestream reset`` (and ``make reset``) calls :func:`plan_reset`, shows the plan, and only with
``--yes`` calls :func:`apply_reset`. Nothing else in the warehouse is touched: only the tables the
workbook itself creates from the configured table name (the events table, its rejects table, raw
archive and metrics table, the notebooks' copies) and the routed tables its route made and owns.
A stream that did not feed the tables is refused, as the ingest refuses it. The stream is deleted
and created again with as many open shards as it had, so its sequence numbers start over; the
ingest ignores positions of an earlier incarnation of a stream anyway
(:mod:`icestream.ingest.positions`), and the dropped tables take theirs with them. The emulator's
own state (``emulator.json``) and the executed notebooks in ``output/`` are kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icestream.config import COPY_SUFFIXES, Settings
from icestream.errors import ConfigError, ServiceUnavailableError
from icestream.ingest.positions import fed_by_another, source_stream
from icestream.ingest.progress import PROGRESS_FILE
from icestream.ingest.routing import owned_tables
from icestream.kinesis.clients import ensure_stream, setup_client
from icestream.producer.background import LOG_FILE, STATE_FILE, stop_background_producer
from icestream.producer.run import RUN_SUMMARY_FILE
from icestream.synthetic.ground_truth import GROUND_TRUTH_FILE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Run state the workbook writes into run_dir (producer summaries, ground truth, the ingest's
# progress log, the notebooks' summaries, the background producer's state and log). The table
# lease lives in a table property, so it goes with the tables.
RUN_STATE_PATTERNS = (
    RUN_SUMMARY_FILE.format(mode="*"),
    GROUND_TRUTH_FILE,
    PROGRESS_FILE,
    STATE_FILE,
    LOG_FILE,
    "0[0-9]_*_summary.json",
)


@dataclass(frozen=True)
class ResetPlan:
    """What a reset deletes and recreates.

    Attributes:
        stream: The stream name.
        shard_count: Open shards the recreated stream gets (as many as it has now, else the setting).
        stream_exists: Whether the stream exists now.
        tables: The workbook's tables that exist now (qualified names), the routed ones last.
        files: Run-state files that exist now.
        routed: Which of ``tables`` are routed tables (named from the events they hold).
    """

    stream: str
    shard_count: int
    stream_exists: bool
    tables: tuple[str, ...]
    files: tuple[Path, ...]
    routed: tuple[str, ...] = ()

    def describe(self) -> list[str]:
        """One line per thing a reset deletes or recreates."""
        lines = [f"drop table {name}{' (routed)' if name in self.routed else ''}" for name in self.tables]
        verb = "delete and recreate" if self.stream_exists else "create"
        lines.append(f"{verb} stream {self.stream} ({self.shard_count} shards)")
        lines += [f"delete {path}" for path in self.files]
        return lines


def workbook_tables(settings: Settings) -> tuple[str, ...]:
    """The qualified names of every table the workbook names from its settings (existing or not).

    The routed tables are not among them: their names come from the events (:func:`plan_reset` finds them).
    """
    copies = [settings.companion_table_name(suffix) for suffix in COPY_SUFFIXES]
    companions = (settings.rejects_table_name, settings.archive_table_name, settings.metrics_table_name)
    return (settings.table_name, *companions, *copies)


def check_stream_feeds_tables(spark: SparkSession, settings: Settings) -> None:
    """Refuse a reset of a stream that did not feed the tables, as the ingest refuses to write them.

    A mistyped or another stream name would have dropped the tables another stream feeds and then made
    a stream of that name. The tables the ingest marks with their stream are the ones asked.

    Raises:
        ConfigError: If a table the ingest writes is recorded as fed by another stream.
    """
    for name in (settings.table_name, settings.rejects_table_name, settings.archive_table_name):
        if spark.catalog.tableExists(name):
            source = source_stream(spark, name)
            if source is not None and source != settings.stream_name:
                raise ConfigError(f"reset refused: {fed_by_another(name, source, settings.stream_name)}")


def run_state_files(settings: Settings) -> tuple[Path, ...]:
    """The run-state files in ``run_dir`` a reset deletes (the emulator's state is not one of them)."""
    run_dir = settings.path("run_dir")
    if not run_dir.is_dir():
        return ()
    return tuple(sorted({path for pattern in RUN_STATE_PATTERNS for path in run_dir.glob(pattern) if path.is_file()}))


def _open_shards(client: Any, stream: str) -> int | None:
    try:
        summary = client.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]
    except client.exceptions.ResourceNotFoundException:
        return None
    return int(summary["OpenShardCount"])


def plan_reset(spark: SparkSession, settings: Settings) -> ResetPlan:
    """What :func:`apply_reset` would do now; changes nothing.

    The tables are the workbook's (:func:`workbook_tables`) and the routed tables its route made
    (:func:`icestream.ingest.routing.owned_tables`): left behind, a routed table kept its rows, and the
    next ingest into the emptied workbook appended to them.

    Raises:
        ConfigError: If the tables are fed by another stream (:func:`check_stream_feeds_tables`).
        ServiceUnavailableError: If Kinesis does not answer.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    check_stream_feeds_tables(spark, settings)
    routed = owned_tables(spark, settings)  # read from the events table before it is dropped
    try:
        shards = _open_shards(setup_client(settings), settings.stream_name)
    except (BotoCoreError, ClientError) as error:
        raise ServiceUnavailableError(f"Kinesis does not answer ({error}); start it or check the profile.") from None
    return ResetPlan(
        stream=settings.stream_name,
        shard_count=shards or settings.shard_count,
        stream_exists=shards is not None,
        tables=(*(name for name in workbook_tables(settings) if spark.catalog.tableExists(name)), *routed),
        files=run_state_files(settings),
        routed=tuple(routed),
    )


def _delete_stream(client: Any, stream: str, timeout: float) -> None:
    client.delete_stream(StreamName=stream, EnforceConsumerDeletion=True)
    deadline = time.monotonic() + timeout
    while _open_shards(client, stream) is not None:  # real Kinesis deletes in the background
        if time.monotonic() > deadline:
            raise ServiceUnavailableError(f"stream {stream} still exists {timeout:.0f} s after DeleteStream.")
        time.sleep(1.0)


def apply_reset(spark: SparkSession, settings: Settings, plan: ResetPlan, timeout: float = 300.0) -> ResetPlan:
    """Carry out a plan: stop the background producer, drop the tables, recreate the stream, delete the files.

    The tables are dropped with ``PURGE`` (their files go too). Set up the tables again with
    ``icestream setup`` or notebook 00.

    Args:
        spark: The session.
        settings: Names the stream, the tables and the run folder.
        plan: From :func:`plan_reset`.
        timeout: Seconds to wait for the stream to be deleted and active again.

    Returns:
        The plan as carried out.

    Raises:
        ServiceUnavailableError: If Kinesis does not answer or the stream does not go away in time.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    stop_background_producer(settings)  # it would write into the stream and the run folder
    for name in plan.tables:
        spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")  # names from Settings (companion_table_name): validated
    client = setup_client(settings)
    try:
        if plan.stream_exists:
            _delete_stream(client, plan.stream, timeout)
    except (BotoCoreError, ClientError) as error:
        raise ServiceUnavailableError(f"could not delete stream {plan.stream}: {error}") from None
    ensure_stream(settings, shard_count=plan.shard_count, timeout=timeout)
    for path in plan.files:
        path.unlink(missing_ok=True)
    return plan
