"""How an ingest query runs: :class:`IngestOptions`, built with :func:`ingest_options`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.ingest.changes import ChangeSpec, change_spec_from_settings
from icestream.ingest.lease import DEFAULT_TTL_SECONDS
from icestream.ingest.routing import Routing, routing_from_settings
from icestream.ingest.schema_evolution import MODES
from icestream.limits import DEFAULT_MAX_EVENT_BYTES, DEFAULT_START_POSITION, GET_CALLS_PER_SECOND, START_POSITIONS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# The moments of a batch where ``fault_hook`` is called (tests raise there to simulate a crash;
# ``icestream ingest --pause-at`` waits there, so that a drill can kill the process: ingest.pause).
# With the raw archive on, it is also called at "after_archive" (its commit comes first); with a
# routing, at "between_tables" after each routed table's commit but the last.
PHASES = ("before_read", "after_read", "between_commits", "after_commit")

SOURCES = ("kinesis", "kafka")  # what an ingest reads (IngestOptions.source)
# A trigger's bounds. An idle query polls every shard once a trigger, and Kinesis allows 5 GetRecords
# calls a second per shard, shared by every reader of it: 200 ms would take them all. The table's lease
# is renewed once a trigger, so two triggers must fit in its 120 s. A drain (available_now) stops at the
# tip and runs its batches back to back, whatever the trigger (as Spark's availableNow does).
MIN_TRIGGER_SECONDS = 1 / GET_CALLS_PER_SECOND
MAX_TRIGGER_SECONDS = DEFAULT_TTL_SECONDS / 2


@dataclass(frozen=True)
class IngestOptions:
    """How the ingest query runs. Every field is validated by :meth:`validated`."""

    # Where the records come from: "kinesis" (the stream the settings name, read by icestream's GetRecords
    # tasks) or "kafka" (the settings' kafka_topic, read by Spark's Kafka source: ingest.reading.kafka_read).
    source: str = "kinesis"
    # Kafka: records retention deleted before they were read stop the query with one error (Spark's
    # failOnDataLoss=true); False skips them, from the partition's first kept offset, and counts them.
    fail_on_data_loss: bool = True
    trigger_seconds: float = 5.0  # processing-time trigger: a batch starts at most this often (a drain: no wait)
    available_now: bool = False  # read what the stream holds now, commit, stop (min_records does not apply)
    # Spark's Kafka minOffsetsPerTrigger / maxTriggerDelay: a trigger runs a batch only once this many
    # Kinesis records wait (a KPL aggregate is one), or once max_trigger_delay_seconds passed since the
    # last batch and at least one waits. None: every trigger that finds a record runs a batch.
    min_records: int | None = None
    max_trigger_delay_seconds: float = 900.0  # 15 minutes, Spark's default maxTriggerDelay
    max_batches: int | None = None  # stop after this many batches
    duration_seconds: float | None = None  # stop after this long
    # Per shard and batch. None (the default): 100,000, ten GetRecords answers (limits.DEFAULT_RECORDS_PER_SHARD).
    max_records_per_shard: int | None = None
    # Over all shards, per batch: each shard's share is this over the shards read (at most the per-shard
    # bound), so a batch's memory follows this, not the backlog. None: 250,000 (limits.DEFAULT_RECORDS_PER_BATCH).
    max_records_per_batch: int | None = None
    # Shards one read task reads, side by side (Databricks' shardsPerTask). None (the default): as many
    # tasks as the session runs at once (a local session's cores, a cluster's executor cores), the
    # shards spread evenly over them, never more tasks than shards (ingest.read_job.read_task_count).
    shards_per_task: int | None = None
    starting_position: str = DEFAULT_START_POSITION  # for shards with no committed position
    starting_timestamp: datetime | None = None  # with starting_position "at_timestamp"
    dedupe: bool = True
    dedupe_lookback: timedelta = timedelta(hours=1)  # of event time, against committed rows
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    transform: Callable[[DataFrame], DataFrame] | None = None  # a Firehose-Lambda-like step (ingest.transform)
    archive: bool = False  # keep every record as received in <table>_raw (ingest_options: archive_raw setting)
    routing: Routing | None = None  # events to the table their route names (ingest.routing); None: the events table
    schema_evolution: str = "off"  # new top-level fields become columns (ingest.evolve); ingest_options: the setting
    # A change stream (ingest.changes): its records are upserts and deletes of a keyed table, the table the
    # settings name, applied by one MERGE per batch. ingest_options: from the changes_* settings.
    changes: ChangeSpec | None = None
    # Keep <table>_metrics (real_time_metrics, lake.metrics_table) current: a MERGE of each batch's new events
    # after the batch commits. ingest_options: the metrics setting.
    metrics: bool = False
    position_commit_seconds: float = 30.0  # commit positions to a table with no new rows this often
    batch_retries: int = 3  # a batch failed by a transient error is retried from the committed state
    # During a backlog, read the next batch while this one dedupes and commits. Off by default: on
    # 2 cores it measured 0.99x and 1.05x (two sets of 5 paired runs, bench/bench_ingest.py): everything
    # is CPU-bound there; it is meant for clusters, whose executors idle while the driver commits.
    prefetch: bool = False
    # At the stream's tip (the last read ended there), read the batch on the driver: its append is
    # then its only Spark job (ingest.tip_read). Off: every batch is read by a Spark job.
    tip_on_driver: bool = True
    # Called at each of PHASES; what it raises counts as a crash there (a transient failure). Tests, and
    # the crash drill's pause (ingest.pause); None: nothing happens there.
    fault_hook: Callable[[str, int], None] | None = None
    on_progress: Callable[[dict[str, Any]], None] | None = None  # called after every batch
    progress_file: Path | None = None  # default <run_dir>/ingest_progress.jsonl
    read_options: dict[str, Any] = field(default_factory=dict)  # ReadOptions overrides (tests)

    def row_options(self) -> dict[str, Any]:
        """What decides a record's row (``ReadOptions``' fields), for either source's read."""
        return {
            "max_event_bytes": self.max_event_bytes,
            "dedupe": self.dedupe,
            "archive": self.archive,
            "evolve": self.schema_evolution != "off",
            "changes": self.changes,
        }

    def validated(self) -> IngestOptions:
        """Check every value.

        Returns:
            The options themselves.

        Raises:
            ConfigError: Naming the first invalid option.
        """
        trigger = self._trigger_problem()
        checks = [
            (self.source in SOURCES, "source", f"choose {' or '.join(SOURCES)}"),
            (trigger is None, "trigger_seconds", trigger or ""),
            (self.min_records is None or self.min_records >= 1, "min_records", "must be at least 1 (None: off)"),
            (
                0 <= self.max_trigger_delay_seconds < math.inf,
                "max_trigger_delay_seconds",
                "must be 0 or more seconds, and finite",
            ),
            (self.max_batches is None or self.max_batches >= 1, "max_batches", "must be at least 1"),
            (self.duration_seconds is None or self.duration_seconds > 0, "duration_seconds", "must be positive"),
            (
                self.max_records_per_shard is None or 1 <= self.max_records_per_shard <= 1_000_000,
                "max_records_per_shard",
                "must be 1..1,000,000",
            ),
            (
                self.max_records_per_batch is None or self.max_records_per_batch >= 1,
                "max_records_per_batch",
                "must be at least 1",
            ),
            (
                self.shards_per_task is None or self.shards_per_task >= 1,
                "shards_per_task",
                "must be at least 1 (None: as many tasks as the session runs at once)",
            ),
            (
                self.starting_position in START_POSITIONS,
                "starting_position",
                "choose trim_horizon, latest or at_timestamp",
            ),
            (
                self.starting_position != "at_timestamp" or self.starting_timestamp is not None,
                "starting_timestamp",
                "is required with starting_position at_timestamp",
            ),
            (self.dedupe_lookback >= timedelta(0), "dedupe_lookback", "must not be negative"),
            (self.max_event_bytes >= 1, "max_event_bytes", "must be positive"),
            (self.batch_retries >= 0, "batch_retries", "must not be negative"),
            (self.schema_evolution in MODES, "schema_evolution", f"choose {', '.join(MODES)}"),
        ]
        if self.changes is not None:
            # A change read twice is harmless under the order rule; an event's id, transform and route have no
            # meaning for a keyed table's rows, and its columns are declared.
            checks += [
                (not self.dedupe, "dedupe", "does not apply to a change stream (a repeated change re-applies)"),
                (self.transform is None, "transform", "does not apply to a change stream"),
                (self.routing is None, "routing", "does not apply to a change stream (one keyed table)"),
                (self.schema_evolution == "off", "schema_evolution", "must be off (declared columns)"),
            ]
        if self.metrics:
            checks += [
                (self.changes is None, "metrics", "follows an events table, not a change stream's keyed table"),
                (
                    self.routing is None,
                    "metrics",
                    "follows the one events table; with a routing, refresh per table with `icestream metrics --table`",
                ),
            ]
        for ok, name, message in checks:
            if not ok:
                raise ConfigError(f"ingest option {name}: {message}.")
        return self

    def _trigger_problem(self) -> str | None:
        seconds = self.trigger_seconds
        if math.isnan(seconds):
            return f"{seconds:g} s is not a time"
        if seconds > MAX_TRIGGER_SECONDS:
            return (
                f"{seconds:g} s is above {MAX_TRIGGER_SECONDS:g} s (--trigger 1m): the table's lease "
                f"({DEFAULT_TTL_SECONDS:g} s) is renewed once a trigger and could lapse between two; for runs "
                "further apart, schedule a drain (available_now, --available-now)"
            )
        if seconds < 0 or (seconds < MIN_TRIGGER_SECONDS and not self.available_now):
            return (
                f"{seconds:g} s is below {MIN_TRIGGER_SECONDS:g} s (--trigger 200ms): an idle query polls every "
                f"shard once a trigger, and Kinesis allows {GET_CALLS_PER_SECOND} GetRecords calls a second per "
                "shard; only a drain (available_now) may run its batches back to back"
            )
        return None


def parse_trigger(text: str) -> float:
    """Parse a trigger interval such as ``5s``, ``500ms``, ``1m`` or ``2`` (seconds).

    Args:
        text: The interval as a user typed it.

    Returns:
        Seconds.

    Raises:
        ConfigError: For anything else.
    """
    value = text.strip().lower()
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if value.endswith(suffix):
            value, factor = value[: -len(suffix)], scale
            break
    else:
        factor = 1.0
    try:
        seconds = float(value) * factor
    except ValueError:
        raise ConfigError(f"trigger {text!r}: use a time such as 5s, 500ms or 1m.") from None
    if not math.isfinite(seconds):
        raise ConfigError(f"trigger {text!r}: use a finite time such as 5s, 500ms or 1m.")
    if seconds < 0:
        raise ConfigError(f"trigger {text!r}: must not be negative.")
    return seconds


def ingest_options(settings: Settings, **options: Any) -> IngestOptions:
    """Build :class:`IngestOptions` from keyword options, with the defaults the settings give.

    Args:
        settings: Where ``starting_position`` comes from when it is not given
            (``ICESTREAM_START_POSITION``).
        **options: Fields of :class:`IngestOptions`; ``dedupe_lookback`` may be seconds; ``routing``
            may be a route (``"event_type"``, ``"module:function"``) or a mapping of the routing
            settings it overrides (``route``, ``route_tables``, ``route_default``, ``route_unknown``);
            when it is not given, the settings' routing applies.

    Returns:
        The options (not yet validated: the query validates them when it is created).

    Raises:
        ConfigError: For an option that does not exist.
    """
    unknown = set(options) - set(IngestOptions.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown ingest option(s): {', '.join(sorted(unknown))}.")
    if options.get("starting_position") is None:
        options["starting_position"] = settings.start_position
    if options.get("archive") is None:
        options["archive"] = settings.archive_raw
    if options.get("metrics") is None:
        options["metrics"] = settings.metrics
    if options.get("schema_evolution") is None:
        options["schema_evolution"] = settings.schema_evolution
    if options.get("changes") is None:
        options["changes"] = change_spec_from_settings(settings)
    if options.get("dedupe") is None:
        options["dedupe"] = options["changes"] is None  # a change stream does not dedupe (see validated)
    routing = options.get("routing")
    if options["changes"] is not None and not routing:
        options["routing"] = None  # the settings' route is for event streams
    elif not isinstance(routing, Routing):
        overrides = {"route": routing} if isinstance(routing, str) else dict(routing or {})
        options["routing"] = routing_from_settings(settings, **overrides)
    if "dedupe_lookback" in options and not isinstance(options["dedupe_lookback"], timedelta):
        options["dedupe_lookback"] = timedelta(seconds=float(options["dedupe_lookback"]))
    return IngestOptions(**options)
