"""Maintenance through Iceberg's procedures: compaction, manifest rewrite, snapshot expiry, orphans.

Each procedure is one ``CALL <catalog>.system.<procedure>(...)`` :class:`~icestream.lake.Statement`
(procedure arguments must be literals, so every value in it is validated first). A method returns
an :class:`~icestream.lake.statement.Outcome` carrying the statement and the procedure's output; on a table
opened with ``dry_run=True`` it returns the statement without running it.

Maintenance never disturbs the ingest's committed position (:mod:`icestream.ingest.positions`):
binpack and manifest rewrites add ``replace`` snapshots that the position search skips, and
:meth:`Maintenance.expire_snapshots` can keep the newest snapshot carrying the positions. All
procedures are safe while the ingest runs: Iceberg retries conflicting commits
(``commit.retry.num-retries`` is 10 on these tables) and a rewrite that only replaces existing
files does not conflict with appends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from icestream.errors import ConfigError
from icestream.lake.statement import Outcome, Statement, timestamp_literal
from icestream.lake.summary import METRICS_SOURCE_KEY, POSITIONS_KEY, STREAM_KEY
from icestream.runtime.platforms import at_least, iceberg_version
from icestream.validation import validate_identifier

_TIME_TRANSFORM = re.compile(r"(?:hours|days|months|years)\((\w+)\)")  # a time partition field

if TYPE_CHECKING:
    from icestream.lake.table import LakeTable

# Iceberg's remove_orphan_files procedure refuses anything younger: a writer that is still
# committing has files on storage that no metadata references yet, and they would look orphaned.
MIN_ORPHAN_AGE = timedelta(hours=24)
# The procedure's own default age (older_than: 3 days ago), the margin Iceberg's docs recommend.
DEFAULT_ORPHAN_AGE = timedelta(days=3)
STRATEGIES = ("binpack", "sort")

# The Iceberg version each procedure argument used here first shipped in (None: the procedure itself).
# Every platform in icestream.runtime.platforms has 1.6.1 or newer, so only prefix_listing (1.10.0,
# apache/iceberg#12254) varies between them; the older entries follow Iceberg's release notes
# (procedures from 0.11/0.13) and were not re-checked per argument here.
REQUIRES: dict[str, dict[str | None, str]] = {
    "rewrite_data_files": {
        None: "0.13.0",
        "strategy": "0.13.0",
        "sort_order": "0.13.0",
        "options": "0.13.0",
        "where": "0.13.0",
    },
    "rewrite_manifests": {None: "0.11.0"},
    "rewrite_position_delete_files": {None: "1.3.0", "options": "1.3.0"},  # apache/iceberg#7572
    "expire_snapshots": {None: "0.11.0", "older_than": "0.11.0", "retain_last": "0.11.0"},
    "remove_orphan_files": {None: "0.11.0", "older_than": "0.11.0", "dry_run": "0.11.0", "prefix_listing": "1.10.0"},
}
# Arguments that may be left out on an older Iceberg, with what that changes (the others are refused).
FALLBACKS = {
    (
        "remove_orphan_files",
        "prefix_listing",
    ): "files are listed through Hadoop's FileSystem (EMR and Glue provide s3://)",
}

_OPTION_KEY = re.compile(r"^[a-z][a-z0-9.-]{0,99}$")
_OPTION_VALUE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_SORT_ITEM = re.compile(r"^\s*(\w+)(?:\s+(ASC|DESC))?(?:\s+NULLS\s+(FIRST|LAST))?\s*$", re.IGNORECASE)


def default_rewrite_options() -> dict[str, str]:
    """Options for binpack on a streaming table: merge any partition with two or more files.

    Iceberg's default ``min-input-files`` (5) leaves partitions of two to four files alone; a streamed
    hour has hundreds, a trickle hour a few, and both should end as one file per target size.
    """
    return {"min-input-files": "2"}


def check_retain_last(retain_last: int, name: str = "retain_last") -> int:
    """Return ``retain_last`` if it keeps at least one snapshot (``expire_snapshots`` keeps the current one).

    Args:
        retain_last: Ancestors of the current snapshot to keep.
        name: What the caller calls it (``--retain-last`` on the command line), named in the error.

    Raises:
        ConfigError: If it is not a whole number of at least 1.
    """
    if isinstance(retain_last, bool) or not isinstance(retain_last, int) or retain_last < 1:
        raise ConfigError(f"{name} {retain_last!r}: keep at least 1 snapshot (the current one); give 1 or more.")
    return retain_last


def sort_order_literal(sort_order: str) -> str:
    """Validate ``"event_type ASC, event_ts ASC NULLS LAST"`` and return it normalised.

    Raises:
        ConfigError: If an item is not ``column [ASC|DESC] [NULLS FIRST|LAST]``.
    """
    items = []
    for item in sort_order.split(","):
        match = _SORT_ITEM.fullmatch(item)
        if not match:
            raise ConfigError(f"sort_order item {item!r}: write column [ASC|DESC] [NULLS FIRST|LAST].")
        column = validate_identifier(match.group(1), "column")
        direction = (match.group(2) or "ASC").upper()
        nulls = f" NULLS {match.group(3).upper()}" if match.group(3) else ""
        items.append(f"{column} {direction}{nulls}")
    return ", ".join(items)


def options_literal(options: Mapping[str, str | int]) -> str:
    """Procedure options as a SQL ``map('key', 'value', ...)`` literal.

    Raises:
        ConfigError: If a key or value is not a plain token.
    """
    pairs = []
    for key, value in options.items():
        text = str(value)
        if not _OPTION_KEY.fullmatch(key) or not _OPTION_VALUE.fullmatch(text):
            raise ConfigError(f"rewrite option {key!r}={text!r}: keys are like min-input-files, values plain tokens.")
        pairs.append(f"'{key}', '{text}'")
    return f"map({', '.join(pairs)})"


class Maintenance:
    """Iceberg's maintenance procedures on one table (``table.maintenance``)."""

    def __init__(self, table: LakeTable, iceberg_version: str | None = None) -> None:
        """Procedures on ``table``.

        Args:
            table: The table.
            iceberg_version: The Iceberg version to write the calls for; None reads it from the
                table's session at the first call (unknown, as in a dry run without one: the newest).
        """
        self._table = table
        self._version = iceberg_version
        self._version_read = iceberg_version is not None
        # What the last call left out for this Iceberg, one line each (see FALLBACKS): a report says it.
        self.fallbacks: list[str] = []

    @property
    def iceberg_version(self) -> str | None:
        """The Iceberg version the calls are written for (None: unknown, every argument is used)."""
        if not self._version_read:
            self._version = iceberg_version(self._table.spark)
            self._version_read = True
        return self._version

    def _call_procedure(self, procedure: str, **arguments: str) -> Outcome:
        """Run ``procedure`` with the arguments this Iceberg knows: older ones drop a fallback argument.

        Raises:
            ConfigError: In one line, if the procedure or an argument without fallback needs a newer Iceberg.
        """
        version, needs = self.iceberg_version, REQUIRES[procedure]
        if not at_least(version, needs[None]):
            raise ConfigError(f"{procedure} needs Iceberg {needs[None]}; this session has Iceberg {version}.")
        usable, self.fallbacks = {}, []
        for name, value in arguments.items():
            if at_least(version, needs[name]):
                usable[name] = value
            elif (procedure, name) not in FALLBACKS:
                raise ConfigError(
                    f"{procedure}({name} => ...) needs Iceberg {needs[name]}; this session has Iceberg {version}."
                )
            else:
                self.fallbacks.append(
                    f"without {name} (Iceberg {needs[name]}; this session has {version}): {FALLBACKS[procedure, name]}"
                )
        return self._table.apply(self._table.procedure(procedure, **usable))

    def rewrite_data_files(
        self,
        strategy: str = "binpack",
        sort_order: str | None = None,
        options: Mapping[str, str | int] | None = None,
        before: datetime | None = None,
        time_column: str = "event_ts",
    ) -> Outcome:
        """Compact data files (``rewrite_data_files``).

        Args:
            strategy: ``binpack`` (merge small files) or ``sort`` (merge and sort by ``sort_order``).
            sort_order: For ``sort``, e.g. ``event_type ASC, event_ts ASC``.
            options: Procedure options, e.g. ``{"min-input-files": 2}``.
            before: Only rewrite rows with ``time_column`` before this (closed hours, not the one
                being written).
            time_column: The column ``before`` applies to (see :meth:`time_partition_column`).

        Returns:
            The outcome; its counts: ``rewritten_data_files_count``, ``added_data_files_count``,
            ``rewritten_bytes_count``, ``failed_data_files_count``, ``removed_delete_files_count``.

        Raises:
            ConfigError: If the strategy, sort order or options are invalid.
        """
        if strategy not in STRATEGIES:
            raise ConfigError(f"strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}.")
        if strategy == "sort" and not sort_order:
            raise ConfigError("strategy 'sort' needs a sort_order such as 'event_type ASC, event_ts ASC'.")
        arguments = {"strategy": f"'{strategy}'"}
        if strategy == "sort":
            arguments["sort_order"] = f"'{sort_order_literal(sort_order or '')}'"
        if options:
            arguments["options"] = options_literal(options)
        if before is not None:
            # The predicate is a string argument parsed by Spark; double quotes delimit it.
            column = validate_identifier(time_column, "time column")
            arguments["where"] = f'"{column} < {timestamp_literal(before)}"'
        return self._call_procedure("rewrite_data_files", **arguments)

    def time_partition_column(self) -> str | None:
        """The column the table is partitioned by in time, or None.

        ``hours(event_ts)`` for the events table, ``days(ingest_ts)`` for its rejects,
        ``days(arrival_ts)`` for the raw archive: what "closed hours" means for each.
        """
        described = self._table.run(Statement(f"DESCRIBE TABLE {self._table.name}")).collect()
        for row in described:
            found = _TIME_TRANSFORM.fullmatch((row.data_type or "").strip())
            if row.col_name.startswith("Part ") and found:
                return found.group(1)
        return None

    def rewrite_position_delete_files(self) -> Outcome:
        """Rewrite every position delete file (``rewrite_position_delete_files``, ``rewrite-all``): the
        ones whose data files are gone (dangling) are dropped.

        Iceberg 1.10.2 fails it on a table with a map column (``Invalid partition field parent``), as
        the events table has; a keyed table has none.

        Returns:
            The outcome; its counts: ``rewritten_delete_files_count``, ``added_delete_files_count``.
        """
        return self._call_procedure("rewrite_position_delete_files", options=options_literal({"rewrite-all": "true"}))

    def rewrite_manifests(self) -> Outcome:
        """Regroup manifests by partition (``rewrite_manifests``).

        Returns:
            The outcome; its counts: ``rewritten_manifests_count``, ``added_manifests_count``.
        """
        return self._call_procedure("rewrite_manifests")

    def retain_for_positions(self, stream_name: str) -> int:
        """How many of the newest ancestors to keep so that the one carrying the stream's positions survives.

        The ingest finds its position in the newest ancestor snapshot whose summary has it;
        maintenance snapshots (``replace``) carry none. Keeping that ancestor keeps the ingest
        answering from the snapshot, not from a derivation over the rows. On a metrics table
        (:mod:`icestream.lake.continuous_aggregate`) the snapshot kept is the newest with the refresh's mark.

        Args:
            stream_name: The stream whose positions must survive.

        Returns:
            The number of snapshots from the current one back to that snapshot, inclusive (1 when
            no snapshot carries positions).
        """
        for depth, snapshot in enumerate(self._table.inspect.ancestry(), start=1):
            summary = snapshot.summary()
            if summary.get(POSITIONS_KEY) is not None and summary.get(STREAM_KEY) == stream_name:
                return depth
            if summary.get(METRICS_SOURCE_KEY) is not None:  # a metrics table: its refreshes fold on from there
                return depth
        return 1

    def expire_snapshots(
        self, older_than: datetime, retain_last: int = 1, keep_positions_of: str | None = None
    ) -> Outcome:
        """Expire old snapshots and delete the files only they referenced (``expire_snapshots``).

        Args:
            older_than: Snapshots committed before this may expire.
            retain_last: Ancestors of the current snapshot kept regardless of age (at least 1).
            keep_positions_of: A stream name: also keep the newest snapshot carrying its positions
                (:meth:`retain_for_positions`), so the ingest keeps reading from where it was.

        Returns:
            The outcome (the statement shows the ``retain_last`` used); its counts:
            ``deleted_data_files_count``, ``deleted_manifest_files_count``,
            ``deleted_manifest_lists_count`` ...

        Raises:
            ConfigError: If ``retain_last`` is below 1 or ``older_than`` is naive.
        """
        check_retain_last(retain_last)
        if keep_positions_of is not None:
            retain_last = max(retain_last, self.retain_for_positions(keep_positions_of))
        return self._call_procedure(
            "expire_snapshots", older_than=timestamp_literal(older_than), retain_last=str(retain_last)
        )

    def remove_orphan_files(self, older_than: datetime, delete: bool = False) -> Outcome:
        """List (and with ``delete``, delete) files under the table that no metadata references.

        Files are listed through the table's FileIO (``prefix_listing => true``), not Hadoop's
        FileSystem: on an ``s3://`` warehouse off EMR Hadoop has no FileSystem for the scheme
        ("No FileSystem for scheme s3", apache/iceberg#11541), while S3FileIO lists it; locally
        HadoopFileIO lists the same files. Before Iceberg 1.10.0 the argument does not exist and is
        left out (:data:`FALLBACKS`): Hadoop's FileSystem lists, which EMR's and Glue's provide for s3://.

        Args:
            older_than: Only files last modified before this; at most now minus
                :data:`MIN_ORPHAN_AGE`, because a running writer's uncommitted files look exactly
                like orphans.
            delete: Delete them; by default Iceberg only lists them (its ``dry_run``).

        Returns:
            The outcome; ``outcome.values("orphan_file_location")`` lists the files.

        Raises:
            ConfigError: If ``older_than`` is less than 24 hours ago, or naive.
        """
        moment = timestamp_literal(older_than)
        if older_than > datetime.now(UTC) - MIN_ORPHAN_AGE:
            raise ConfigError(
                f"older_than {older_than.isoformat()}: orphan removal must only touch files older than "
                f"{MIN_ORPHAN_AGE}; a running writer's files are not referenced until it commits."
            )
        return self._call_procedure(
            "remove_orphan_files", older_than=moment, dry_run=str(not delete).lower(), prefix_listing="true"
        )
