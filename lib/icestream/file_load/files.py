"""Load JSON-lines files into the events and rejects tables: the role of the seeds' Glue ETL job.

``load_files(spark, settings, paths)`` takes local files or any Hadoop path (``file:``, ``s3a:``,
``hdfs:``; folders and globs too), gzip-compressed or not (told by the gzip magic bytes, not the
name), one JSON event per line. Every line goes through the stream's own parser
(:func:`~icestream.ingest.parse.parse_payload`): a line that is not a valid event lands in the
rejects table with the same reason codes; valid events are deduplicated like the stream's (within
the file, then against the ids the events table holds within ``dedupe_lookback``, with the same
:class:`~icestream.ingest.dedupe.CommittedIndex`), optionally transformed
(:mod:`~icestream.ingest.transform`), and appended. Blank lines are not records and are skipped.

**Each file is loaded once.** A file is known by a key, a digest of its qualified path, size and
modification time (a file rewritten in place is a new file). Each file is one commit to each
table, rejects first, and each commit carries the key in its snapshot summary
(``icestream.file_load-file``): the ledger of loaded files commits atomically with the data, as the
stream's positions do. Before loading, each table's ledger is read (its snapshot ancestry; when
snapshot expiry cut that history, the rows themselves, whose ``shard_id`` is ``file-<key>``), and
a table that holds the file is not written again. A crash anywhere, even between the two commits
or inside a write, therefore never loads a file twice or half: load again and what is missing is
written. Two loads of the same file running at the same moment are not fenced against each other.

Rows record where they came from like streamed ones: ``shard_id`` ``file-<key>``,
``sequence_number`` the line number (from 1), ``arrival_ts`` the file's modification time. Each file
is read whole by one Spark task (Spark's ``binaryFile`` source), so a file must stay below 2 GiB.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.ingest import dedupe
from icestream.ingest.parse import ParsedEvent, parse_payload
from icestream.ingest.reading.record_rows import ROW_FIELDS, arrow_schema, record_batch, row_schema
from icestream.ingest.reading.spark_job import release_rows
from icestream.ingest.transform import REJECT_COLUMNS, run_transform
from icestream.lake.inspect import ancestry
from icestream.lake.schema import table_columns
from icestream.lake.summary import QUERY_KEY
from icestream.lake.table_evolution import align_columns
from icestream.limits import DEFAULT_MAX_EVENT_BYTES
from icestream.runtime.handles import first_row

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LOAD_FILE_KEY = "icestream.file_load-file"  # snapshot summary: the key of the file the commit loaded
LOAD_PATH_KEY = "icestream.file_load-path"  # and its path, for people reading the history
FILE_SHARD_PREFIX = "file-"
GZIP_MAGIC = b"\x1f\x8b"
LOAD_PHASES = ("between_commits", "after_commit")  # where ``fault`` is called (tests)
_GLOB_CHARACTERS = re.compile(r"([{}\[\]*?\\])")


@dataclass(frozen=True)
class SourceFile:
    """One file to load, as Spark's file listing saw it."""

    path: str  # qualified (file:/..., s3a://...)
    size: int
    modified: datetime

    @property
    def key(self) -> str:
        """16 hex digits naming this version of this file (path, size, modification time)."""
        identity = f"{self.path}\n{self.size}\n{self.modified.timestamp():.3f}".encode()
        return hashlib.sha256(identity).hexdigest()[:16]

    @property
    def shard_id(self) -> str:
        """The ``shard_id`` its rows carry."""
        return f"{FILE_SHARD_PREFIX}{self.key}"


@dataclass
class LoadResult:
    """What a load did, summed over its files."""

    files: int = 0  # files found
    loaded: int = 0  # files read and committed now
    skipped: int = 0  # files both tables already held
    lines: int = 0  # records (non-blank lines) read
    written: int = 0  # events committed
    rejected: int = 0  # rejects committed
    deduplicated: int = 0  # events dropped as repeats (within a file or against the table)
    reasons: dict[str, int] = field(default_factory=dict)  # rejects per reason, parser's and transform's


def list_files(spark: SparkSession, paths: Iterable[str]) -> list[SourceFile]:
    """The files under ``paths`` (files, folders or globs; Hadoop hides names starting with ``_`` or ``.``).

    Raises:
        ConfigError: If a path does not exist or nothing is found.
    """
    paths = [str(path) for path in paths]
    if not paths:
        raise ConfigError("icestream load: give at least one file, folder or glob.")
    try:
        # Only the listing columns: the binaryFile source then does not read the contents.
        rows = spark.read.format("binaryFile").load(paths).select("path", "length", "modificationTime").collect()
    except Exception as error:
        if "PATH_NOT_FOUND" in str(error) or "Path does not exist" in str(error):
            raise ConfigError(f"icestream load: {str(error).splitlines()[0]}. Check the path.") from None
        raise
    if not rows:
        raise ConfigError(f"icestream load: no files under {', '.join(paths)}.")
    files = {row.path: SourceFile(row.path, int(row.length), row.modificationTime.astimezone(UTC)) for row in rows}
    return [files[path] for path in sorted(files)]


def loaded_keys(spark: SparkSession, table: str, keys: Iterable[str]) -> set[str]:
    """Which of ``keys`` the table's ledger (or, after expiry, its rows) says were loaded."""
    wanted, found = set(keys), set()
    complete = True  # the walk reached the table's first snapshot
    for snapshot in ancestry(spark, table):
        key = snapshot.summary().get(LOAD_FILE_KEY)
        if key in wanted:
            found.add(key)
        complete = snapshot.parentId() is None
    missing = wanted - found
    if missing and not complete:
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        shards = [f"{FILE_SHARD_PREFIX}{key}" for key in sorted(missing)]
        rows = spark.table(table).where(F.col("shard_id").isin(shards)).select("shard_id").distinct().collect()
        found.update(row.shard_id.removeprefix(FILE_SHARD_PREFIX) for row in rows)
    return found


def split_lines(content: bytes) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of each non-blank line, gzip decompressed first; ``\\r\\n`` endings too."""
    if content[:2] == GZIP_MAGIC:
        content = gzip.decompress(content)
    for number, line in enumerate(content.split(b"\n"), start=1):
        if line.strip():
            yield number, line.removesuffix(b"\r")


def parse_file(
    source: SourceFile, content: bytes, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, dedupe_ids: bool = True
) -> Iterator[tuple]:
    """Rows (``reader.ROW_FIELDS`` order) for one file: events, rejects, then one meta row.

    The meta row carries the counts as JSON in ``meta`` and the new events' digests
    (:class:`~icestream.ingest.dedupe.Packer`) in ``raw_data``, as a stream read task's does.
    """
    counts: dict[str, Any] = {"lines": 0, "good": 0, "rejected": 0, "deduplicated": 0, "reasons": {}}
    packer, seen, emitted = dedupe.Packer(), set(), 0
    shard, arrival = source.shard_id, source.modified
    for number, line in split_lines(content):
        counts["lines"] += 1
        parsed = parse_payload(line, max_event_bytes)
        # By name, not position: the reader's row layout may grow columns.
        row: dict[str, Any] = {
            "shard_id": shard,
            "sequence_number": str(number),
            "partition_key": None,
            "arrival_ts": arrival,
        }
        if isinstance(parsed, ParsedEvent):
            counts["good"] += 1
            if dedupe_ids and parsed.event_id in seen:
                counts["deduplicated"] += 1
                continue
            seen.add(parsed.event_id)
            packer.add(parsed.event_id, parsed.event_ts, arrival)
            row.update(
                kind="event",
                event_id=parsed.event_id,
                user_id=parsed.user_id,
                session_id=parsed.session_id,
                event_type=parsed.event_type,
                event_ts=parsed.event_ts,
                properties=parsed.properties,
                device_info=parsed.device_info,
                ordinal=emitted,
            )
            emitted += 1
        else:
            counts["rejected"] += 1
            counts["reasons"][parsed.reason] = counts["reasons"].get(parsed.reason, 0) + 1
            row.update(
                kind="reject",
                raw_data=bytes(line),
                raw_text=line.decode("utf-8", errors="replace")[:4096],
                reason=parsed.reason,
                detail=parsed.detail,
            )
        yield tuple(row.get(name) for name in ROW_FIELDS)
    meta = dict.fromkeys(ROW_FIELDS)
    meta.update(kind="meta", shard_id=shard, raw_data=packer.pack(), meta=json.dumps(counts))
    yield tuple(meta[name] for name in ROW_FIELDS)


def _file_task(
    source: SourceFile, max_event_bytes: int, dedupe_ids: bool, batch_id: int | None, ingest_ts: datetime
) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function: the file's ``content`` in, Arrow batches of rows out."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        schema = arrow_schema()
        for batch in batches:
            for content in batch.column(0).to_pylist():
                rows = list(parse_file(source, content, max_event_bytes, dedupe_ids))
                for start in range(0, len(rows), 10_000):
                    yield record_batch(rows[start : start + 10_000], schema, batch_id, ingest_ts)

    return run


class FileLoader:
    """Loads files one by one into the events and rejects tables (see the module docstring)."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        dedupe_lookback: timedelta = timedelta(hours=1),
        dedupe_ids: bool = True,
        transform: Callable[[DataFrame], DataFrame] | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        fault: Callable[[str, str], None] | None = None,
    ) -> None:
        """Check both tables exist.

        Raises:
            ConfigError: If a table does not exist.
        """
        self.spark, self.settings = spark, settings
        self.events, self.rejects = settings.table_name, settings.rejects_table_name
        for table in (self.events, self.rejects):
            if not spark.catalog.tableExists(table):
                raise ConfigError(f"Table {table} does not exist. Create it with `icestream setup` (or notebook 00).")
        self.run_id = str(uuid.uuid4())
        self.dedupe_ids, self.transform, self.max_event_bytes = dedupe_ids, transform, max_event_bytes
        self.fault = fault or (lambda phase, path: None)
        self.index = dedupe.CommittedIndex(self.events, self.run_id, dedupe_lookback // timedelta(microseconds=1))
        self.done: dict[str, set[str]] = {self.events: set(), self.rejects: set()}

    def plan(self, files: list[SourceFile]) -> list[SourceFile]:
        """The files some table still lacks (reads both ledgers)."""
        keys = [source.key for source in files]
        for table in (self.events, self.rejects):
            self.done[table] = loaded_keys(self.spark, table, keys)
        return [source for source in files if source.key not in self.done[self.events]]

    def load(self, source: SourceFile, result: LoadResult) -> None:
        """Read, parse, dedupe and commit one file (rejects first, then events); add to ``result``."""
        from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

        ingest_ts = datetime.now(UTC)
        content = self.spark.read.format("binaryFile").load(_GLOB_CHARACTERS.sub(r"\\\1", source.path))
        task = _file_task(source, self.max_event_bytes, self.dedupe_ids, None, ingest_ts)
        # Kept as rows, like a stream batch's (see source.ReadBatch.rows); the meta job reads them once.
        rows = content.select("content").mapInArrow(task, row_schema()).localCheckpoint(eager=False)
        try:
            meta = first_row(rows.where("kind = 'meta'").select("meta", "raw_data"))
            counts = json.loads(meta.meta)
            events = rows.where("kind = 'event'")
            batch, duplicates = self._duplicates(source, bytes(meta.raw_data or b""))
            dropped = batch.ordinals[duplicates]
            if len(dropped):
                events = events.where(~F.col("ordinal").isin(dropped.tolist()))
            events = events.select(*table_columns())
            rejects = rows.where("kind = 'reject'").select(*REJECT_COLUMNS)
            routed = 0
            if self.transform is not None:
                events, routed_rows = run_transform(self.transform, events, None)
                if routed_rows is not None:
                    rejects = rejects.unionByName(routed_rows)
                    routed_counts = routed_rows.groupBy("reason").count().collect()
                    routed = sum(row["count"] for row in routed_counts)
                    for row in routed_counts:
                        counts["reasons"][row.reason] = counts["reasons"].get(row.reason, 0) + row["count"]
            if source.key not in self.done[self.rejects] and counts["rejected"] + routed:
                result.rejected += self._append(self.rejects, rejects, source)
            self.fault("between_commits", source.path)
            events = align_columns(events, self.spark.table(self.events).schema.fields)
            result.written += self._append(self.events, events, source)
            if self.transform is None:
                kept = np.setdiff1d(np.arange(len(batch), dtype=np.int64), duplicates, assume_unique=True)
                self.index.add(batch, kept)
            else:
                self.index.reset()  # a transform may change or drop rows: only the table knows
            self.fault("after_commit", source.path)
        finally:
            release_rows(rows)
        result.loaded += 1
        result.lines += counts["lines"]
        result.deduplicated += counts["deduplicated"] + len(dropped)
        for reason, number in counts["reasons"].items():
            result.reasons[reason] = result.reasons.get(reason, 0) + number

    def _duplicates(self, source: SourceFile, packed: bytes) -> tuple[dedupe.Batch, np.ndarray]:
        """The file's new events, and which of them the table already holds (within the lookback)."""
        batch = dedupe.Batch.unpack({source.shard_id: packed})
        if not self.dedupe_ids:
            return batch, np.empty(0, dtype=np.int64)
        return batch, dedupe.duplicates(self.index, batch, self.spark)

    def _append(self, table: str, frame: DataFrame, source: SourceFile) -> int:
        """Append ``frame`` with the file's ledger entry in the same commit; the rows it added."""
        properties = {
            f"snapshot-property.{LOAD_FILE_KEY}": source.key,
            f"snapshot-property.{LOAD_PATH_KEY}": source.path,
            f"snapshot-property.{QUERY_KEY}": self.run_id,
        }
        frame.writeTo(table).options(**properties).append()
        self.done[table].add(source.key)
        for snapshot in ancestry(self.spark, table):
            summary = snapshot.summary()
            if summary.get(QUERY_KEY) == self.run_id and summary.get(LOAD_FILE_KEY) == source.key:
                return int(summary.get("added-records") or 0)
        return 0


def load_files(
    spark: SparkSession,
    settings: Settings,
    paths: Iterable[str],
    progress: bool = False,
    **options: Any,
) -> LoadResult:
    """Load JSON-lines files into the settings' events and rejects tables, each file at most once.

    Args:
        spark: The session.
        settings: Name the tables.
        paths: Files, folders or globs (local or any Hadoop path).
        progress: Show a one-line progress bar (tqdm, on stderr).
        **options: :class:`FileLoader` options: ``dedupe_lookback``, ``dedupe_ids``, ``transform``,
            ``max_event_bytes``, ``fault``.

    Returns:
        What was loaded.

    Raises:
        ConfigError: For a path that does not exist, or a table that does not exist.
    """
    from tqdm import tqdm

    loader = FileLoader(spark, settings, **options)
    files = list_files(spark, paths)
    todo = loader.plan(files)
    result = LoadResult(files=len(files), skipped=len(files) - len(todo))
    with tqdm(
        total=sum(source.size for source in todo),
        unit="B",
        unit_scale=True,
        disable=not progress,
        desc="load",
        dynamic_ncols=True,
        leave=True,
    ) as bar:
        for source in todo:
            loader.load(source, result)
            bar.update(source.size)
            bar.set_postfix(files=f"{result.loaded}/{len(todo)}", events=result.written, rejects=result.rejected)
    result.reasons = dict(sorted(result.reasons.items()))
    return result
