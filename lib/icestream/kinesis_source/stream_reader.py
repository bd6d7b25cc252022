"""The source's stream reader: Spark's offsets as per-shard positions, each batch's end fixed by reading.

An offset is ``{"stream": …, "created": …, "shards": {shard id: position}}``, the positions in the
ingest's own form (:mod:`icestream.ingest.positions`): ``TRIM_HORIZON``, ``AT_TIMESTAMP:<s>``,
``AFTER:<sequence number>``, ``END:<sequence number>`` for a closed shard read to its end. Spark
writes every batch's end offset to its offset log before the batch runs, and a replayed batch is
planned from the same two offsets, so it reads the same records. An end offset also carries each
read shard's ``millisBehindLatest`` (how far behind the tip the batch's end is): Spark shows offsets
in ``lastProgress``, in its UI and to listeners, and a Python source has no metrics of its own on 4.1.

How a batch goes (Spark calls each step; ``latestOffset`` and ``partitions`` run on the driver in one
Python process that lives as long as the query):

1. ``latestOffset``: ListShards, then each readable shard is read from its position up to
   ``maxFetchRecordsPerShard`` records or its tip (:func:`~icestream.kinesis_source.fetch.fetch_to_cap`);
   the end is after the last record read. A child shard of a split or merge is readable once every
   parent is at ``END`` (:func:`~icestream.ingest.reading.shard_plan.plan_shards`), so records of one
   partition key keep their order. Nothing new: the same offset, and Spark runs no batch.
2. ``partitions(start, end)``: one partition per shard (or per ``shardsPerTask`` shards), each carrying
   the records step 1 read; a batch replayed after a restart has none, and its task reads the shard
   again to exactly the end (:func:`~icestream.kinesis_source.fetch.fetch_to_end`).
3. ``read``: on an executor, the records become rows (:mod:`~icestream.kinesis_source.rows`).

The offsets also say which incarnation of the stream they belong to (``created``, its creation time):
a stream deleted and created again under the same name has the same shard ids and new sequence
numbers, and reading on would skip or repeat records, so the query stops with one clear error.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from icestream.errors import ConfigError, IngestError, ServiceUnavailableError
from icestream.ingest import positions as pos
from icestream.ingest.gate import ITERATOR_REUSE_SECONDS
from icestream.ingest.reading.shard_plan import plan_shards
from icestream.kinesis.clients import KinesisConnection, list_shards
from icestream.kinesis_source import crash_drill
from icestream.kinesis_source.fetch import Fetched, Pacer, Record, fetch_to_cap, fetch_to_end
from icestream.kinesis_source.options import SourceOptions
from icestream.kinesis_source.rows import CHUNK_ROWS, record_batches

PROBE_THREADS = 8  # shards whose end is fixed side by side on the driver
# A shard's records ride with its task only up to this many bytes: a task travels whole to its executor
# (Spark's RPC messages are at most 128 MiB), and records of up to 1 MiB each could exceed that at the
# cap. Past it the task reads the shard's range again itself, as a replay does.
SHIP_BYTES = 8 * 1024 * 1024
LAG_KEY = "millisBehindLatest"  # an end offset's per-shard lag (MillisBehindLatest of its last GetRecords)


@dataclass(frozen=True)
class ShardRange:
    """One shard's part of a batch: the records after ``start`` up to and including ``end``'s last."""

    shard_id: str
    start: str
    end: str
    records: list[Record] | None  # read when the end was fixed; None: the task reads them (a replay)


class ShardRanges(InputPartition):
    """One task's shards: what Spark pickles from the driver to the task."""

    def __init__(self, ranges: tuple[ShardRange, ...]) -> None:
        super().__init__(ranges)
        self.ranges = ranges


_CLIENTS: dict[KinesisConnection, Any] = {}


def connection_of(options: SourceOptions) -> KinesisConnection:
    return KinesisConnection(options.profile, options.region, options.endpoint, options.role_arn)


def worker_client(options: SourceOptions) -> Any:
    """One client per connection and Python process: a task's reader is unpickled afresh, and making a
    boto3 client (loading its service model) costs more than a small batch's read. botocore's own
    retries are off: the fetch loop paces and repeats its calls itself."""
    connection = connection_of(options)
    if connection not in _CLIENTS:
        _CLIENTS[connection] = connection.client(read_timeout=10.0, max_attempts=0)
    return _CLIENTS[connection]


class KinesisStreamReader(DataSourceStreamReader):
    """Spark's stream reader for a Kinesis stream (see the module docstring)."""

    def __init__(self, options: SourceOptions, client: Any = None) -> None:
        self.options = options
        self._client = client
        self._pacer = Pacer()
        self._created: str | None = None
        self._initial: dict[str, Any] | None = None  # fixed once: Spark asks for it more than once
        self._end: dict[str, Any] | None = None  # the last batch's end Spark told us of, or we gave it
        self._probed: dict[str, Fetched] = {}  # the last latestOffset's reads, per shard
        self._iterators: dict[str, tuple[str, str, float]] = {}  # shard -> (position, iterator, when)

    # -- the driver's side -------------------------------------------------------------------------

    def client(self) -> Any:
        return self._client if self._client is not None else worker_client(self.options)

    def _stream_created(self) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        name = self.options.stream_name
        try:
            summary = self.client().describe_stream_summary(StreamName=name)
        except ClientError as error:
            if "ResourceNotFound" in str(error):
                raise ConfigError(f"Kinesis stream {name} does not exist in {self.options.region}") from None
            raise ServiceUnavailableError(f"Kinesis did not describe stream {name}: {error}") from None
        except BotoCoreError as error:
            where = self.options.endpoint or f"Kinesis in {self.options.region}"
            raise ServiceUnavailableError(f"{where} does not answer: {error}") from None
        return f"{summary['StreamDescriptionSummary']['StreamCreationTimestamp'].timestamp():.3f}"

    def _starting_position(self) -> str:
        if self.options.starting == "trim_horizon":
            return pos.TRIM_HORIZON
        if self.options.starting == "at_timestamp":
            assert self.options.starting_timestamp is not None
            return pos.at_timestamp(self.options.starting_timestamp)
        return pos.at_timestamp(datetime.now(UTC))  # latest: fixed once, in the first offset Spark logs

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        """Where a query with no checkpoint starts: every shard without a listed parent, at the starting position.

        Fixed at the first call: Spark's first batch calls ``latestOffset`` (which starts from here) and
        then ``initialOffset`` again for the batch's start; a "latest" start taken anew would begin after
        the records the batch's end was fixed with, and its replay could never reach that end.
        """
        if self._initial is not None:
            return self._initial
        self._created = self._stream_created()
        listing = list_shards(self.client(), self.options.stream_name)
        given = self.options.starting_shards
        if given is not None:
            known = {shard["ShardId"] for shard in listing}
            shards = {shard: position for shard, position in given.items() if shard in known}
            for plan in plan_shards(listing, shards, shards, pos.TRIM_HORIZON):
                shards.setdefault(plan.shard_id, plan.start)
        else:
            start = self._starting_position()
            shards = {plan.shard_id: plan.start for plan in plan_shards(listing, {}, {}, start)}
        self._initial = {
            "stream": self.options.stream_name,
            "created": self._created,
            "shards": dict(sorted(shards.items())),
        }
        return self._initial

    def _check_incarnation(self, offset: dict[str, Any]) -> None:
        if self._created is None:
            self._created = self._stream_created()
        if offset.get("created") != self._created:
            raise IngestError(
                f"Kinesis stream {self.options.stream_name} was deleted and created again since this checkpoint "
                "was written: its positions belong to the old stream. Start the query with a new checkpoint"
            )

    def latestOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        """The next batch's end: each readable shard read up to ``maxFetchRecordsPerShard`` records or its tip."""
        crash_drill.reached("latest_offset")
        start = self._end if self._end is not None else self.initialOffset()
        self._check_incarnation(start)
        current: dict[str, str] = dict(start["shards"])
        listing = list_shards(self.client(), self.options.stream_name)
        plans = plan_shards(listing, current, current, pos.TRIM_HORIZON)
        now = time.monotonic()
        kept = {
            shard: iterator
            for shard, (position, iterator, when) in self._iterators.items()
            if now - when < ITERATOR_REUSE_SECONDS and position == current.get(shard, pos.TRIM_HORIZON)
        }
        client = self.client()
        cap = self.options.max_records_per_shard

        def probe(plan: Any) -> Fetched:
            return fetch_to_cap(
                client,
                self.options.stream_name,
                plan.shard_id,
                plan.start,
                cap,
                self._pacer,
                kept.get(plan.shard_id),
                plan.closed,
            )

        with ThreadPoolExecutor(max_workers=max(1, min(PROBE_THREADS, len(plans)))) as pool:
            fetched = list(pool.map(probe, plans))
        now = time.monotonic()
        self._iterators = {
            one.shard_id: (one.end, one.next_iterator, now) for one in fetched if one.next_iterator is not None
        }
        moved = {one.shard_id: one for one in fetched if one.end != current.get(one.shard_id)}
        if not moved:
            self._end = start
            return start
        self._probed = moved
        shards = dict(current)
        shards.update({shard: one.end for shard, one in moved.items()})
        # Each shard's lag as the batch's end was fixed, for lastProgress, the UI and listeners (a Python
        # source has no metrics of its own on Spark 4.1). Read only with the end: an idle stream's
        # lag changing alone must not make Spark run an empty batch.
        behind = {one.shard_id: one.millis_behind for one in fetched if one.millis_behind is not None}
        end = {**start, "shards": dict(sorted(shards.items())), LAG_KEY: dict(sorted(behind.items()))}
        self._end = end
        return end

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[ShardRanges]:
        """The batch's tasks: the shards that moved between ``start`` and ``end``, with their records when known."""
        crash_drill.reached("partitions")
        self._end = end
        before, after = start.get("shards", {}), end["shards"]
        ranges = []
        for shard_id, last in after.items():
            first = before.get(shard_id, pos.TRIM_HORIZON)
            if first == last or pos.last_sequence(last) is None or pos.last_sequence(last) == pos.last_sequence(first):
                continue  # nothing read: unchanged, or a closed shard that ended with no new record
            probed = self._probed.get(shard_id)
            known = probed is not None and probed.start == first and probed.end == last
            shipped = probed.records if known and probed else None
            if shipped is not None and sum(len(record[3]) for record in shipped) > SHIP_BYTES:
                shipped = None
            ranges.append(ShardRange(shard_id, first, last, shipped))
        per_task = self.options.shards_per_task
        return [ShardRanges(tuple(ranges[index : index + per_task])) for index in range(0, len(ranges), per_task)]

    def commit(self, end: dict[str, Any]) -> None:
        """Spark committed the batch ending at ``end``: a restarted query learns its start here."""
        if self._end is None:
            self._end = end
        self._probed = {shard: one for shard, one in self._probed.items() if one.end != end["shards"].get(shard)}

    def stop(self) -> None:
        self._probed = {}

    # -- an executor's side ------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Any:
        """A task's shards' rows as Arrow record batches (under the crash drill: half, its moment, the rest)."""
        drilled = bool(crash_drill.os.environ.get(crash_drill.ENV, "").startswith("read"))
        assert isinstance(partition, ShardRanges)
        yielded = 0
        for part in partition.ranges:
            records = part.records
            if records is None:
                records = fetch_to_end(
                    self.client(), self.options.stream_name, part.shard_id, part.start, part.end, self._pacer
                )
            chunk = max(1, len(records) // 2) if drilled else CHUNK_ROWS
            for batch in record_batches(
                self.options.stream_name, part.shard_id, records, self.options.max_event_bytes, chunk
            ):
                yield batch
                yielded += 1
                if yielded == 1:
                    crash_drill.reached("read")
