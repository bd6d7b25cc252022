"""Scheduled maintenance of a streaming table: the four steps in order, one report line each.

What a table the ingest writes every few seconds needs, as Iceberg's maintenance guide orders it:

1. ``compact``: ``rewrite_data_files`` (binpack) of the *closed* hours only, ``event_ts`` before the
   start of the current hour: the hour being written still gets a file per batch, and rewriting it
   now would be redone within the hour (late events into a closed hour are merged by the next run);
   When the table has delete files (merge-on-read writes: :mod:`icestream.lake.rowlevel`), the
   rewrite also takes every data file with a delete file (``delete-file-threshold`` 1), so the
   deletes are applied and reads stop paying for them, and drops the delete files that then point
   at no live data file (``remove-dangling-deletes``). Iceberg's ``rewrite_position_delete_files``
   is not used: with Iceberg 1.10.2 it fails on a table with a map column, as the events table has
   (``ValidationException: Invalid partition field parent: map<string, string>``);
2. ``manifests``: ``rewrite_manifests``, so planning reads few manifests grouped by partition;
3. ``expire``: ``expire_snapshots`` older than an age, always keeping the newest snapshot that carries
   the ingest's Kinesis positions (:meth:`~icestream.lake.maintenance.Maintenance.retain_for_positions`),
   so the ingest keeps reading from its own commit;
4. ``orphans``: ``remove_orphan_files`` older than an age that is at least Iceberg's 24 hours
   (default: the procedure's 3 days), listed through the table's FileIO.

:func:`run_maintenance` runs a :class:`MaintenancePlan` on a :class:`~icestream.lake.LakeTable`; on a
table opened with ``dry_run=True`` every step records its statement and runs nothing, so the plan
(the exact ``CALL``\\ s) can be printed first. A step that fails does not stop the others (each is
safe alone); its result carries the error, and the caller decides the exit status.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from icestream.errors import ConfigError
from icestream.lake.maintenance import (
    DEFAULT_ORPHAN_AGE,
    MIN_ORPHAN_AGE,
    check_retain_last,
    default_rewrite_options,
)
from icestream.lake.statement import Outcome, Statement
from icestream.runtime.handles import first_row

if TYPE_CHECKING:
    import pandas as pd

    from icestream.lake.table import LakeTable

STEPS = ("compact", "manifests", "expire", "orphans")
# Iceberg's default snapshot age (history.expire.max-snapshot-age-ms): 5 days of time travel.
DEFAULT_SNAPSHOT_AGE = timedelta(days=5)
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_AGE_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str) -> timedelta:
    """Parse an age such as ``3d``, ``36h``, ``90m`` or ``1w``.

    Raises:
        ConfigError: For anything else.
    """
    match = _AGE.fullmatch(text or "")
    if not match:
        raise ConfigError(f"age {text!r}: write a number and a unit (s, m, h, d, w), e.g. 3d or 36h.")
    return timedelta(**{_AGE_UNITS[match.group(2).lower()]: float(match.group(1))})


def parse_steps(text: str) -> tuple[str, ...]:
    """``compact,expire`` → the steps in their fixed order.

    Raises:
        ConfigError: If a name is not one of :data:`STEPS`.
    """
    names = {name.strip() for name in text.split(",") if name.strip()}
    unknown = sorted(names - set(STEPS))
    if unknown or not names:
        raise ConfigError(f"steps {text!r}: choose from {', '.join(STEPS)} (comma-separated).")
    return tuple(step for step in STEPS if step in names)


def start_of_hour(moment: datetime) -> datetime:
    """The start of ``moment``'s hour in UTC: rows before it are in closed hours."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class MaintenancePlan:
    """What one maintenance run does (see the module docstring).

    Attributes:
        expire_before: Snapshots committed before this may expire.
        orphans_before: Only unreferenced files last modified before this are removed; at most
            now minus :data:`~icestream.lake.maintenance.MIN_ORPHAN_AGE`.
        compact_before: Compact rows with ``event_ts`` before this (closed hours); None compacts
            every hour, the one being written too (fine for a table nothing writes to).
        keep_positions_of: The stream whose newest positions snapshot expiry must keep (None: none).
        retain_last: Ancestors of the current snapshot always kept (more if the positions need it).
        steps: The steps to run, a subset of :data:`STEPS` in that order.
        rewrite_options: Options of the binpack rewrite.
        delete_orphans: False only lists orphans (Iceberg's own ``dry_run``).
    """

    expire_before: datetime
    orphans_before: datetime
    compact_before: datetime | None = None
    keep_positions_of: str | None = None
    retain_last: int = 1
    steps: tuple[str, ...] = STEPS
    rewrite_options: Mapping[str, str | int] = field(default_factory=default_rewrite_options)
    delete_orphans: bool = True

    def __post_init__(self) -> None:
        """Check every step's arguments here, so that a bad one fails before the first step runs.

        Raises:
            ConfigError: For a step that is not one of :data:`STEPS` or a ``retain_last`` below 1.
        """
        unknown = [step for step in self.steps if step not in STEPS]
        if unknown:
            raise ConfigError(f"maintenance step {unknown[0]!r}: choose from {', '.join(STEPS)}.")
        check_retain_last(self.retain_last)

    @classmethod
    def scheduled(
        cls,
        stream_name: str | None,
        now: datetime | None = None,
        snapshot_age: timedelta = DEFAULT_SNAPSHOT_AGE,
        orphan_age: timedelta = DEFAULT_ORPHAN_AGE,
        **options: Any,
    ) -> MaintenancePlan:
        """The plan ``icestream maintain`` runs: closed hours, ages counted back from ``now``.

        Args:
            stream_name: The stream whose positions expiry keeps.
            now: The moment the ages count from (default: now).
            snapshot_age: Snapshots older than this may expire.
            orphan_age: Unreferenced files older than this are removed (at least 24 hours).
            **options: Other fields (``retain_last``, ``steps``, ``delete_orphans`` ...).

        Raises:
            ConfigError: If ``orphan_age`` is below Iceberg's 24 hours, an age is negative, a step unknown
                or ``retain_last`` below 1.
        """
        if orphan_age < MIN_ORPHAN_AGE:
            raise ConfigError(
                f"orphan age {orphan_age}: at least {MIN_ORPHAN_AGE} (Iceberg refuses less: a running writer's "
                "uncommitted files look like orphans); the default is 3 days."
            )
        if snapshot_age < timedelta(0):
            raise ConfigError(f"snapshot age {snapshot_age}: must not be negative.")
        now = now or datetime.now(UTC)
        return cls(
            expire_before=now - snapshot_age,
            orphans_before=now - orphan_age,
            compact_before=start_of_hour(now),
            keep_positions_of=stream_name,
            **options,
        )


@dataclass(frozen=True)
class StepResult:
    """One step of a run: what ran (or would run), what it changed, how long it took.

    Attributes:
        step: One of :data:`STEPS`.
        outcome: The procedure's outcome (its statement; output None in a dry run), None if the
            step failed before it had one.
        changed: The counts that matter for the step (empty in a dry run).
        seconds: Wall time of the step.
        error: One line saying why the step failed; empty when it worked.
        note: What the call left out for this Iceberg version, and what that changes; empty if nothing.
    """

    step: str
    outcome: Outcome | None
    changed: dict[str, int]
    seconds: float
    error: str = ""
    note: str = ""

    @property
    def ok(self) -> bool:
        """Whether the step worked (a dry run's planned step counts as worked)."""
        return not self.error

    def line(self) -> str:
        """The step's report line: ``step  what changed  seconds``."""
        if self.error:
            what = f"FAILED: {self.error}"
        elif self.outcome is not None and not self.outcome.ran:
            what = "planned (dry run), nothing changed"
        else:
            what = ", ".join(f"{key} {value}" for key, value in self.changed.items()) or "nothing"
        note = f" ({self.note})" if self.note and not self.error else ""
        return f"{self.step:<10} {what}{note}  [{self.seconds:.2f} s]"


def results_frame(results: list[StepResult]) -> pd.DataFrame:
    """The report as a table: one row per step, its counts as columns, ``seconds`` and ``error``."""
    import pandas as pd

    rows = [{"step": result.step, **result.changed} for result in results]
    frame = pd.DataFrame(rows).set_index("step").fillna(0).astype("int64")
    frame["seconds"] = [round(result.seconds, 2) for result in results]
    frame["error"] = [result.error for result in results]
    return frame


def _compact(table: LakeTable, plan: MaintenancePlan) -> tuple[Outcome, dict[str, int]]:
    # "Closed hours" in the table's own time column (the rejects table has no event_ts); a table
    # not partitioned by time is compacted whole.
    column = table.maintenance.time_partition_column()
    before = plan.compact_before if column is not None else None
    options = dict(plan.rewrite_options)
    delete_files_before = _delete_files(table)
    if delete_files_before:
        options.setdefault("delete-file-threshold", "1")  # rewrite the files that have deletes: apply them
        options.setdefault("remove-dangling-deletes", "true")  # and drop the delete files left pointing at nothing
        # New files take the rewrite's own sequence number, after every delete file's: all of them dangle.
        options.setdefault("use-starting-sequence-number", "false")
    outcome = table.maintenance.rewrite_data_files(options=options, before=before, time_column=column or "event_ts")
    counts = outcome.counts
    delete_files_after = _delete_files(table) if "delete-file-threshold" in options and outcome.ran else None
    if delete_files_after and not _has_map_column(table):
        # Seen with Iceberg 1.10.2 on a keyed (unpartitioned) table: some dangling position deletes outlive
        # remove-dangling-deletes. Rewriting the position delete files drops them.
        table.maintenance.rewrite_position_delete_files()
        delete_files_after = _delete_files(table)
    changed = {
        "files rewritten": counts.get("rewritten_data_files_count", 0),
        "files added": counts.get("added_data_files_count", 0),
        "bytes rewritten": counts.get("rewritten_bytes_count", 0),
        "files failed": counts.get("failed_data_files_count", 0),
    }
    if delete_files_after is not None:
        # The procedure's removed_delete_files_count leaves out the dangling ones it drops afterwards.
        changed["delete files removed"] = delete_files_before - delete_files_after
    return outcome, changed


def _has_map_column(table: LakeTable) -> bool:
    return any(
        field.dataType.typeName() == "map"
        for field in table.run(Statement(f"SELECT * FROM {table.name} LIMIT 0")).schema.fields
    )


def _delete_files(table: LakeTable) -> int:
    return int(first_row(table.run(Statement(f"SELECT count(*) AS n FROM {table.name}.delete_files"))).n)


def _manifests(table: LakeTable, plan: MaintenancePlan) -> tuple[Outcome, dict[str, int]]:
    counts = (outcome := table.maintenance.rewrite_manifests()).counts
    return outcome, {
        "manifests rewritten": counts.get("rewritten_manifests_count", 0),
        "manifests added": counts.get("added_manifests_count", 0),
    }


def _snapshot_count(table: LakeTable) -> int:
    return int(first_row(table.run(Statement(f"SELECT count(*) AS n FROM {table.name}.snapshots"))).n)


def _expire(table: LakeTable, plan: MaintenancePlan) -> tuple[Outcome, dict[str, int]]:
    before = None if table.dry_run else _snapshot_count(table)
    outcome = table.maintenance.expire_snapshots(
        plan.expire_before, retain_last=plan.retain_last, keep_positions_of=plan.keep_positions_of
    )
    if not outcome.ran:
        return outcome, {}
    counts = outcome.counts
    return outcome, {
        "snapshots expired": (before or 0) - _snapshot_count(table),
        "data files deleted": counts.get("deleted_data_files_count", 0),
        "manifests deleted": counts.get("deleted_manifest_files_count", 0),
        "manifest lists deleted": counts.get("deleted_manifest_lists_count", 0),
    }


def _orphans(table: LakeTable, plan: MaintenancePlan) -> tuple[Outcome, dict[str, int]]:
    outcome = table.maintenance.remove_orphan_files(plan.orphans_before, delete=plan.delete_orphans)
    found = len(outcome.values("orphan_file_location"))
    return outcome, {("orphans removed" if plan.delete_orphans else "orphans found"): found}


RUNNERS: dict[str, Callable[[LakeTable, MaintenancePlan], tuple[Outcome, dict[str, int]]]] = {
    "compact": _compact,
    "manifests": _manifests,
    "expire": _expire,
    "orphans": _orphans,
}


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def run_maintenance(
    table: LakeTable, plan: MaintenancePlan, on_step: Callable[[StepResult], None] | None = None
) -> list[StepResult]:
    """Run the plan's steps in order on ``table`` (on a ``dry_run`` table: plan them).

    In a dry run the ``expire`` statement's ``retain_last`` is read from the table as it is now;
    a real run reads it when the step runs, after the compaction and manifest snapshots (which it
    then keeps too).

    Args:
        table: The table (``LakeTable(spark, name, dry_run=...)``).
        plan: What to do.
        on_step: Called with each step's result as soon as it is known (to print it).

    Returns:
        One result per step; a failed step has ``error`` set and the following steps still run.
    """
    results = []
    for step in plan.steps:  # each checked when the plan was made (MaintenancePlan.__post_init__)
        previous, started = table.last_statement, time.perf_counter()
        table.maintenance.fallbacks = []
        try:
            outcome, changed = RUNNERS[step](table, plan)
            note = "; ".join(table.maintenance.fallbacks)
            result = StepResult(step, outcome, changed if outcome.ran else {}, time.perf_counter() - started, note=note)
        except Exception as error:  # noqa: BLE001 - a scheduled run reports every step; Spark raises many types
            statement = table.last_statement
            # Maintenance runs statements only (no DataFrame calls): a failed CALL is a Statement.
            failed = None  # the CALL that failed, if it got that far
            if isinstance(statement, Statement) and statement is not previous and statement.writes:
                failed = Outcome(statement, None)
            result = StepResult(step, failed, {}, time.perf_counter() - started, _one_line(error))
        results.append(result)
        if on_step is not None:
            on_step(result)
    return results
