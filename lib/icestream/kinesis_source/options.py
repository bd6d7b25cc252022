"""The options of ``spark.readStream.format("kinesis")``: their names, their meaning, and one clear error.

The reference job's names (``streamName``, ``regionName``, ``startingPosition``) and ``endpointUrl``
are the source's own; awslabs' connector spells them ``kinesis.streamName``, ``kinesis.region``,
``kinesis.endpointUrl`` and ``kinesis.startingPosition``, and those spellings mean the same here,
as does its ``kinesis.maxFetchRecordsPerShard``. Spark hands a source its options with the names
folded to lower case, so they are matched without regard to case. An option the source does not
know, or a value it cannot use, stops the query before it starts with one line that names what
is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlparse

from icestream.errors import ConfigError
from icestream.kinesis.clients import LOOPBACK_HOSTS
from icestream.limits import MAX_RECORDS_PER_GET

# Records per shard and batch: a batch's end is fixed by reading up to this many records of each
# shard on the driver (kinesis_source.fetch), so it bounds both a batch and the driver's memory.
DEFAULT_RECORDS_PER_SHARD = 10_000

# Each option's own name, then the other spellings that mean the same.
NAMES: dict[str, tuple[str, ...]] = {
    "streamName": ("kinesis.streamName",),
    "regionName": ("kinesis.region", "region"),
    "endpointUrl": ("kinesis.endpointUrl",),
    "startingPosition": ("kinesis.startingPosition",),
    "maxFetchRecordsPerShard": ("kinesis.maxFetchRecordsPerShard", "maxRecordsPerShard"),
    "shardsPerTask": ("kinesis.shardsPerTask",),
    "roleArn": ("kinesis.awsSTSRoleARN",),
    "maxEventBytes": (),
}
STARTING_POSITIONS = ("latest", "trim_horizon", "at_timestamp:<ISO time or epoch seconds>", "a JSON of shard positions")


@dataclass(frozen=True)
class SourceOptions:
    """What one query's source was asked for, checked."""

    stream_name: str
    region: str
    endpoint: str | None
    starting: str  # "latest", "trim_horizon" or "at_timestamp"
    starting_timestamp: datetime | None  # for "at_timestamp"
    starting_shards: dict[str, str] | None  # per-shard positions (ingest.positions), for a JSON start
    max_records_per_shard: int
    shards_per_task: int
    role_arn: str | None
    max_event_bytes: int

    @property
    def profile(self) -> str:
        """The credentials' source: an emulator on this machine takes dummy keys, anything else AWS's chain."""
        host = urlparse(self.endpoint).hostname if self.endpoint else None
        return "local" if host in LOOPBACK_HOSTS else "aws"


def _accepted() -> str:
    return ", ".join(f"{name} ({' / '.join(others)})" if others else name for name, others in NAMES.items())


def _canonical(options: Mapping[str, str]) -> dict[str, str]:
    """Options under their own names; an unknown one, or one given twice under two spellings, is an error."""
    lookup = {spelling.lower(): name for name, others in NAMES.items() for spelling in (name, *others)}
    found: dict[str, str] = {}
    for key, value in options.items():
        if key.lower() == "path":  # load(path) is not how a stream is named here
            raise ConfigError(f"the kinesis source takes the stream as option streamName, not as load({value!r})")
        name = lookup.get(key.lower())
        if name is None:
            raise ConfigError(f"the kinesis source has no option {key!r}; it accepts {_accepted()}")
        if name in found and found[name] != value:
            raise ConfigError(f"the kinesis source's option {name} is given twice, as {found[name]!r} and {value!r}")
        found[name] = value
    return found


def _count(name: str, text: str | None, default: int, highest: int | None = None) -> int:
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or (highest is not None and value > highest):
        upper = f" and at most {highest:,}" if highest else ""
        raise ConfigError(f"the kinesis source's option {name} is a whole number of at least 1{upper}, not {text!r}")
    return value


def _timestamp(text: str) -> datetime:
    try:
        moment = datetime.fromtimestamp(float(text), UTC)
    except (ValueError, OverflowError, OSError):  # not a number, or one out of datetime's range
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ConfigError(
                f"startingPosition at_timestamp:{text!r}: give an ISO time (2026-12-01T10:00:00Z) or epoch seconds"
            ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _shard_positions(text: str) -> dict[str, str]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    shards = value.get("shards", value) if isinstance(value, dict) else None
    valid = ("TRIM_HORIZON", "AT_TIMESTAMP:", "AFTER:", "END:")
    if not isinstance(shards, dict) or not all(
        isinstance(key, str) and isinstance(position, str) and position.startswith(valid)
        for key, position in shards.items()
    ):
        raise ConfigError(
            "startingPosition as JSON maps shard ids to positions (TRIM_HORIZON, AT_TIMESTAMP:<s>, AFTER:<seq>, "
            f"END:<seq>), as icestream.starting_positions gives them; not {text[:80]!r}"
        )
    inside = sorted(shard for shard, position in shards.items() if position.count(":") > 1)
    if inside:
        raise ConfigError(
            f"startingPosition: {inside[0]} starts inside a KPL aggregate ({shards[inside[0]]}), which the source "
            "cannot resume (its batches end after whole records); start after the whole record instead"
        )
    return dict(shards)


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Check a query's options and fix what they mean.

    Raises:
        ConfigError: For an unknown option, a missing stream name or region, or a value it cannot use.
    """
    given = _canonical(options)
    stream = given.get("streamName", "").strip()
    if not stream:
        raise ConfigError("the kinesis source needs option streamName (the Kinesis stream to read)")
    region = given.get("regionName", "").strip()
    if not region:
        raise ConfigError("the kinesis source needs option regionName (the stream's AWS region, as us-east-1)")
    endpoint = given.get("endpointUrl", "").strip() or None
    if endpoint and urlparse(endpoint).scheme not in ("http", "https"):
        raise ConfigError(f"the kinesis source's option endpointUrl is an http(s) URL, not {endpoint!r}")
    text = given.get("startingPosition", "latest").strip()
    kind, _, rest = text.partition(":")
    timestamp, shards = None, None
    if text.startswith("{"):
        kind, shards = "positions", _shard_positions(text)
    elif kind.lower() == "at_timestamp" and rest:
        kind, timestamp = "at_timestamp", _timestamp(rest.strip())
    elif text.lower() in ("latest", "trim_horizon"):
        kind = text.lower()
    else:
        raise ConfigError(f"startingPosition is one of {', '.join(STARTING_POSITIONS)}; not {text!r}")
    return SourceOptions(
        stream_name=stream,
        region=region,
        endpoint=endpoint,
        starting=kind,
        starting_timestamp=timestamp,
        starting_shards=shards,
        max_records_per_shard=_count(
            "maxFetchRecordsPerShard",
            given.get("maxFetchRecordsPerShard"),
            DEFAULT_RECORDS_PER_SHARD,
            100 * MAX_RECORDS_PER_GET,
        ),
        shards_per_task=_count("shardsPerTask", given.get("shardsPerTask"), 1),
        role_arn=given.get("roleArn") or None,
        max_event_bytes=_count("maxEventBytes", given.get("maxEventBytes"), 10 * 1024 * 1024),
    )
