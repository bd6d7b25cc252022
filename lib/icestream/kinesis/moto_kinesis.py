"""moto's Kinesis model, patched to behave and scale like Kinesis Data Streams.

Three sets of replacements, all installed by :func:`install` in the emulator process: resharding
as Kinesis does it (:func:`faithful_resharding`), a record store whose cost per call does not
grow with the shard, with retention (below), and GetRecords answers written directly
(:mod:`icestream.kinesis.records_answer`).

**Record store.**
moto 5.2.5 keeps a shard's records in an ``OrderedDict`` keyed by sequence number and finds its
way in it by scanning: every PutRecords entry lists all keys to find the last one, every
GetRecords walks the shard from its first record to the iterator's position, and
``ListShards``/``DescribeStream`` list all keys twice per shard. The cost of a call therefore
grows with the shard's length (measured: 677 puts/s into a stream holding 200k records against
3,996/s into a fresh one), so long runs measured the emulator, not icestream. It also keeps every
record for ever, while Kinesis drops records older than the stream's retention period (24 hours by
default, ``IncreaseStreamRetentionPeriod`` up to a year).

moto numbers a shard's records 1, 2, 3, ... with no gaps (each put takes the last number plus
one), so the record after position ``p`` is simply key ``p + 1``: these replacements reach any
record by key in constant time, and find a timestamp by bisection. Retention drops records from
the front of a shard as calls touch it, as Kinesis does lazily. The patch checks the moto version
and the shape it replaces, so an upgrade fails loudly here rather than subtly in a benchmark.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from icestream.errors import EmulatorError
from icestream.kinesis.records_answer import direct_records_answer
from icestream.kinesis.write_limits import WriteLimits, throttled_message
from icestream.limits import MAX_BYTES_PER_PUT, MAX_RECORD_BYTES, MAX_RECORDS_PER_PUT, THROTTLED

CHECKED_MOTO_VERSIONS = ("5.2.5",)  # the versions whose Shard internals these replacements mirror


def _require_checked_moto() -> Any:
    import moto
    from moto.kinesis import models

    if moto.__version__ not in CHECKED_MOTO_VERSIONS:
        raise EmulatorError(
            f"moto {moto.__version__} is installed, but the emulator's Kinesis patches were checked against "
            f"{', '.join(CHECKED_MOTO_VERSIONS)}: install the pinned version (make setup) or re-check "
            "icestream.kinesis.moto_kinesis against the new moto.kinesis.models.Shard."
        )
    replaced = (
        "Shard.get_records",
        "Shard.put_record",
        "Shard.get_min_sequence_number",
        "Shard.get_max_sequence_number",
        "Shard.get_sequence_number_at",
        "Stream.put_record",
        "KinesisBackend.get_records",
        "KinesisBackend.put_records",
    )
    missing = [name for name in replaced if not hasattr(getattr(models, name.split(".")[0], None), name.split(".")[1])]
    if missing or not isinstance(models.Shard(0, 0, 1).records, dict):
        changed = ", ".join(missing) or "Shard.records"
        raise EmulatorError(f"moto.kinesis.models changed shape ({changed}): re-check icestream.kinesis.moto_kinesis.")
    return models


def _first_key(shard: Any) -> int:
    return next(iter(shard.records)) if shard.records else 0


def _last_key(shard: Any) -> int:
    return next(reversed(shard.records)) if shard.records else 0


def trim(shard: Any, retention_seconds: float, current: float) -> int:
    """Drop the shard's records older than the retention period; return how many were dropped.

    Args:
        shard: A moto ``Shard``.
        retention_seconds: The stream's retention period.
        current: The current time, epoch seconds.
    """
    oldest_kept = current - retention_seconds
    dropped = 0
    records = shard.records
    while records:
        first = next(iter(records))
        if records[first].created_at >= oldest_kept:
            break
        # Keep the numbering: the next put still takes last + 1 even when everything expired.
        shard.last_sequence_number = max(getattr(shard, "last_sequence_number", 0), first)
        del records[first]
        dropped += 1
    return dropped


def now() -> float:
    """Epoch seconds now: the retention clock (tests replace it to age records without waiting a day)."""
    return time.time()


# The per-shard write limits in force (None: off); set by install(), read on every put.
_write_limits: WriteLimits | None = None


def install(write_limits: WriteLimits | None = None) -> None:
    """Install every replacement (idempotent); ``write_limits`` (None: off) applies from now on.

    Raises:
        EmulatorError: If the installed moto is not a version these replacements were checked against.
    """
    global _write_limits  # one emulator per process: the limits are the process's
    models = _require_checked_moto()
    _write_limits = write_limits
    if getattr(models, "_icestream_patched", False):
        return  # installed already: wrapping the wrappers would trim twice per call
    models._icestream_patched = True
    faithful_resharding()
    constant_cost_records(models)
    enforce_write_limits(models)
    from moto.kinesis import responses

    direct_records_answer(responses)


def enforce_write_limits(models: Any) -> None:
    """Throttle puts beyond a shard's write limits (:mod:`icestream.kinesis.write_limits`) when they are on.

    ``Stream.put_record`` (which every put goes through) raises ``ProvisionedThroughputExceededException``
    for a record the shard's budget cannot take: PutRecord answers with that error; PutRecords,
    replaced here, answers it for that entry only and stores the others, as Kinesis does. A record
    above 1 MiB (data and partition key) is refused first, limits on or off, with Kinesis's
    ``ValidationException``: no budget could ever take it, so a throttle would be retried for ever.
    """
    from base64 import b64decode

    from moto.core.exceptions import JsonRESTError
    from moto.kinesis.exceptions import RecordSizeExceedsLimit, TooManyRecords, TotalRecordsSizeExceedsLimit

    class ThrottledError(JsonRESTError):
        def __init__(self, message: str) -> None:
            super().__init__(error_type=THROTTLED, message=message)

    class RecordTooLargeError(JsonRESTError):
        def __init__(self) -> None:  # PutRecord's answer on AWS (PutRecords': RecordSizeExceedsLimit)
            message = (
                "1 validation error detected: Value at 'data' failed to satisfy constraint: "
                f"Member must have length less than or equal to {MAX_RECORD_BYTES}"
            )
            super().__init__(error_type="ValidationException", message=message)

    limited_put = models.Stream.put_record

    def stream_put_record(self: Any, partition_key: str, explicit_hash_key: str, data: str) -> tuple[str, str]:
        size = len(b64decode(data)) + len(partition_key)
        if size > MAX_RECORD_BYTES:
            raise RecordTooLargeError
        limits = _write_limits
        if limits is not None:
            shard = self.get_shard_for_key(partition_key, explicit_hash_key)
            if shard is not None and not limits.admit(self.stream_name, shard.shard_id, size):
                raise ThrottledError(throttled_message(shard.shard_id, self.stream_name, self.account_id))
        return limited_put(self, partition_key, explicit_hash_key, data)

    def put_records(self: Any, stream_arn: str, stream_name: str, records: list[dict[str, Any]]) -> dict[str, Any]:
        stream = self.describe_stream(stream_arn=stream_arn, stream_name=stream_name)
        if len(records) > MAX_RECORDS_PER_PUT:
            raise TooManyRecords
        sizes = [len(b64decode(record.get("Data", ""))) + len(record.get("PartitionKey", "")) for record in records]
        if sum(sizes) > MAX_BYTES_PER_PUT:
            raise TotalRecordsSizeExceedsLimit
        for position, size in enumerate(sizes, start=1):
            if size > MAX_RECORD_BYTES:
                raise RecordSizeExceedsLimit(position=position)
        answer: dict[str, Any] = {"FailedRecordCount": 0, "Records": []}
        for record in records:
            try:
                sequence, shard = stream.put_record(
                    record.get("PartitionKey"), record.get("ExplicitHashKey"), record.get("Data")
                )
            except ThrottledError as error:
                answer["FailedRecordCount"] += 1
                answer["Records"].append({"ErrorCode": THROTTLED, "ErrorMessage": error.message})
            else:
                answer["Records"].append({"SequenceNumber": sequence, "ShardId": shard})
        return answer

    models.Stream.put_record = stream_put_record
    models.KinesisBackend.put_records = put_records


def constant_cost_records(models: Any) -> None:
    """Replace moto's per-shard record lookups with constant-cost ones and enforce retention."""

    def get_records(self: Any, last_sequence_id: str, limit: int | None) -> tuple[list[Any], int, int]:
        last = int(last_sequence_id)
        first_wanted = max(last + 1, _first_key(self))
        end = _last_key(self)
        stop = end if limit is None else min(end, first_wanted + limit - 1)
        results = [self.records[key] for key in range(first_wanted, stop + 1)]
        if not results:
            return [], last, 0
        behind = self.records[end].created_at - results[-1].created_at
        return results, results[-1].sequence_number, int(behind * 1000)

    def put_record(self: Any, partition_key: str, data: str, explicit_hash_key: str) -> str:
        number = max(_last_key(self), getattr(self, "last_sequence_number", 0)) + 1
        self.records[number] = models.Record(partition_key, data, number, explicit_hash_key)
        return str(number)

    def get_min_sequence_number(self: Any) -> int:
        return _first_key(self)

    def get_max_sequence_number(self: Any) -> int:
        return max(_last_key(self), getattr(self, "last_sequence_number", 0))

    def get_sequence_number_at(self: Any, at_timestamp: float) -> int:
        # The last record created before at_timestamp (0 if none): arrival times grow with the key.
        low, high = _first_key(self), _last_key(self)
        if not self.records or at_timestamp <= self.records[low].created_at:
            return 0
        while low < high:
            middle = (low + high + 1) // 2
            if self.records[middle].created_at < at_timestamp:
                low = middle
            else:
                high = middle - 1
        return low

    original_put = models.Stream.put_record
    original_get = models.KinesisBackend.get_records

    def stream_put_record(self: Any, partition_key: str, explicit_hash_key: str, data: str) -> tuple[str, str]:
        answer = original_put(self, partition_key, explicit_hash_key, data)
        _trim_stream(self)
        return answer

    def backend_get_records(self: Any, stream_arn: str | None, shard_iterator: str, limit: int | None) -> Any:
        from moto.kinesis.utils import decompose_shard_iterator

        stream_name = decompose_shard_iterator(shard_iterator)[0]
        _trim_stream(self.describe_stream(stream_arn=stream_arn, stream_name=stream_name))
        return original_get(self, stream_arn, shard_iterator, limit)

    def _trim_stream(stream: Any) -> None:
        current, retention = now(), stream.retention_period_hours * 3600.0
        for shard in stream.shards.values():
            # Cheap when nothing expired: one look at each shard's oldest record.
            if shard.records and shard.records[_first_key(shard)].created_at < current - retention:
                trim(shard, retention, current)

    models.Shard.get_records = get_records
    models.Shard.put_record = put_record
    models.Shard.get_min_sequence_number = get_min_sequence_number
    models.Shard.get_max_sequence_number = get_max_sequence_number
    models.Shard.get_sequence_number_at = get_sequence_number_at
    models.Stream.put_record = stream_put_record
    models.KinesisBackend.get_records = backend_get_records


def faithful_resharding() -> None:
    """Make moto 5.2's SplitShard and MergeShards behave like Kinesis Data Streams.

    moto (checked in 5.2.5) differs from Kinesis in three ways that matter to a reader of
    resharded streams: it keeps routing new records to the closed parent (its key lookup ignores
    whether a shard is open, and misses the last key of every range); on a split it moves the
    parent's records into the children; on a merge it copies both parents' records into the child,
    so they exist twice. In Kinesis a closed shard keeps its records (readable until retention ends),
    receives nothing new, and children start empty. This replaces those three methods.
    """
    from moto.kinesis import models
    from moto.kinesis.exceptions import InvalidArgumentError

    def open_shard_for_key(self: models.Stream, partition_key: str, explicit_hash_key: str) -> models.Shard | None:
        if not isinstance(partition_key, str) or len(partition_key) > 256:
            raise InvalidArgumentError("partition_key")
        if explicit_hash_key:
            key = int(explicit_hash_key)
            if key >= 2**128:
                raise InvalidArgumentError("explicit_hash_key")
        else:
            # Kinesis maps a partition key to a shard by the MD5 hash of its UTF-8 bytes.
            key = int(hashlib.md5(partition_key.encode("utf-8"), usedforsecurity=False).hexdigest(), 16)
        return next(
            (
                shard
                for shard in self.shards.values()
                if shard.is_open and shard.starting_hash <= key <= shard.ending_hash
            ),
            None,
        )

    def next_shard_number(self: models.Stream) -> int:
        return max(shard._shard_id for shard in self.shards.values()) + 1

    def split_shard(self: models.Stream, shard_to_split: str, new_starting_hash_key: str) -> None:
        shard = self.shards[shard_to_split]
        boundary = int(new_starting_hash_key)
        if not shard.starting_hash < boundary <= shard.ending_hash or not shard.is_open:
            raise InvalidArgumentError(f"cannot split {shard_to_split} at {new_starting_hash_key}")
        number = next_shard_number(self)
        for offset, (low, high) in enumerate(((shard.starting_hash, boundary - 1), (boundary, shard.ending_hash))):
            child = models.Shard(number + offset, low, high, parent=shard.shard_id)
            self.shards[child.shard_id] = child
        shard.is_open = False

    def merge_shards(self: models.Stream, shard_to_merge: str, adjacent_shard_to_merge: str) -> None:
        first, second = self.shards[shard_to_merge], self.shards[adjacent_shard_to_merge]
        low, high = sorted((first, second), key=lambda shard: shard.starting_hash)
        if low.ending_hash + 1 != high.starting_hash or not (first.is_open and second.is_open):
            raise InvalidArgumentError(adjacent_shard_to_merge)
        child = models.Shard(
            next_shard_number(self),
            low.starting_hash,
            high.ending_hash,
            parent=first.shard_id,
            adjacent_parent=second.shard_id,
        )
        self.shards[child.shard_id] = child
        first.is_open = second.is_open = False

    # Replacing moto's methods is the point of this module (version-guarded above).
    models.Stream.get_shard_for_key = open_shard_for_key  # type: ignore[method-assign]
    models.Stream.split_shard = split_shard  # type: ignore[method-assign]
    models.Stream.merge_shards = merge_shards  # type: ignore[method-assign]
