"""Kinesis clients for the active profile.

``KinesisConnection`` is a small picklable value (endpoint, region, profile, role) that the driver
resolves once and ships to Spark tasks, which build their own boto3 clients from it: executors on
a cluster cannot read the driver's emulator state file. Dummy keys are used only for the
``local`` and ``localstack`` profiles, and the ``local`` profile refuses a non-loopback endpoint,
so those keys are never sent anywhere but an emulator. With ``aws_role_arn`` every client (the
driver's and each executor's) assumes the role itself, from its own host's credentials.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

from icestream.config import Settings
from icestream.errors import ConfigError, ServiceUnavailableError
from icestream.kinesis.emulator import START_COMMAND, Emulator
from icestream.limits import MAX_SHARD_COUNT
from icestream.runtime.aws import KEPT_LOCK, kept_session, profile_session
from icestream.validation import ENV_PREFIX

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class KinesisConnection:
    """Everything a process needs to open a Kinesis client; safe to pickle (no credentials)."""

    profile: str
    region: str
    endpoint: str | None
    role_arn: str | None = None  # assumed by each process that opens a client

    def client(
        self, connect_timeout: float = 5.0, read_timeout: float = 30.0, max_attempts: int = 3, validate: bool = True
    ) -> Any:
        """Open a boto3 Kinesis client.

        Args:
            connect_timeout: Seconds to wait for a connection.
            read_timeout: Seconds to wait for an answer.
            max_attempts: botocore's own retries (standard mode) for transient errors, after the first try.
            validate: botocore checks each request's parameters (off for a caller that checks its own).

        Returns:
            A ``boto3`` Kinesis client.
        """
        from botocore.config import Config

        options: dict[str, Any] = {
            "region_name": self.region,
            "config": Config(
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                retries={"mode": "standard", "max_attempts": max_attempts},
                parameter_validation=validate,
            ),
        }
        if self.endpoint:
            options["endpoint_url"] = self.endpoint
        session = kept_session(
            ("kinesis", self.profile, self.region, self.role_arn),
            lambda: profile_session(self.profile, self.region, self.role_arn, botocore_session=_botocore_session()),
        )
        with KEPT_LOCK:
            return session.client("kinesis", **options)


def utc_timestamp(value: Any) -> Any:
    """botocore's timestamp parser, made cheap for the epoch numbers Kinesis's JSON answers hold.

    botocore's default turns every epoch number into a ``tzlocal()`` datetime, which costs about
    9 µs per record in dateutil, more than half of the client's time per GetRecords answer (bench:
    a bare drain of 60,000 records spent 1.03 s of client CPU, 0.45 s with this parser). The
    instant is the same; only the zone differs (UTC). Anything else goes to botocore's parser.
    """
    if type(value) is float or type(value) is int:  # a JSON number (never a bool); a type check costs least
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            pass
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)


def _botocore_session() -> Any:
    """A botocore session whose clients parse timestamps with :func:`utc_timestamp` and GetRecords'
    records directly (:mod:`icestream.kinesis.records_parser`)."""
    import botocore.session

    from icestream.kinesis.records_parser import RecordsParserFactory

    session = botocore.session.get_session()
    session.register_component("response_parser_factory", RecordsParserFactory())
    # The documented hook the AWS CLI itself uses to choose how timestamps are parsed.
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=utc_timestamp)
    return session


def resolve_endpoint(settings: Settings) -> str | None:
    """The Kinesis endpoint for the active profile (None means AWS's own).

    Raises:
        ServiceUnavailableError: For the ``local`` profile when the emulator is not running.
        ConfigError: If the ``local`` profile is pointed at a non-loopback endpoint.
    """
    if settings.profile != "local":
        return settings.kinesis_endpoint
    if settings.kinesis_endpoint:
        host = urlparse(settings.kinesis_endpoint).hostname
        if host not in LOOPBACK_HOSTS:
            raise ConfigError(
                f"ICESTREAM_KINESIS_ENDPOINT / kinesis_endpoint: the local profile only talks to an emulator on "
                f"this machine, not {host}. Use the localstack or aws profile for other endpoints."
            )
        return settings.kinesis_endpoint
    endpoint = local_emulator(settings).endpoint()
    if endpoint is None:
        raise ServiceUnavailableError(f"The local Kinesis emulator is not running. Start it with: {START_COMMAND}")
    return endpoint


def local_emulator(settings: Settings) -> Emulator:
    """The local profile's emulator: its run folder's, found on its port from any run folder.

    The port is the configured endpoint's (so that ``icestream emulator start`` starts the emulator the
    endpoint names), else the ``emulator_port`` setting (0: a free one, found by the run folder's state file).
    """
    port = urlparse(settings.kinesis_endpoint).port if settings.kinesis_endpoint else None
    return Emulator(settings.path("run_dir"), port=port or settings.emulator_port or None)


def kinesis_connection(settings: Settings) -> KinesisConnection:
    """Resolve the connection for the active profile (see :func:`resolve_endpoint`)."""
    return KinesisConnection(settings.profile, settings.region, resolve_endpoint(settings), settings.aws_role_arn)


def kinesis_client(settings: Settings, **options: Any) -> Any:
    """A boto3 Kinesis client for the active profile; options go to :meth:`KinesisConnection.client`."""
    return kinesis_connection(settings).client(**options)


# Tries of each call setup and reset make (botocore's standard retries, kinesis_timeout each); doctor tries once.
SETUP_ATTEMPTS = 2
CHECK_ATTEMPTS = 1


def setup_client(settings: Settings, attempts: int = SETUP_ATTEMPTS) -> Any:
    """A Kinesis client for the few calls that set up or check a stream (setup, reset, doctor).

    Each try waits ``kinesis_timeout`` seconds for a connection, then as long for the answer: an
    endpoint that accepts and never answers had setup silent for two minutes (botocore's 30 s reads
    and retries).

    Args:
        settings: The profile's endpoint and the ``kinesis_timeout`` setting.
        attempts: Tries of each call.
    """
    timeout = settings.kinesis_timeout
    # botocore's retries option "max_attempts" counts the retries after the first try.
    return kinesis_client(settings, connect_timeout=timeout, read_timeout=timeout, max_attempts=attempts - 1)


def _tries(attempts: int) -> str:
    return f"{attempts} {'try' if attempts == 1 else 'tries'}"


def _where(connection: KinesisConnection) -> str:
    return f"at {connection.endpoint}" if connection.endpoint else f"of AWS in {connection.region}"


def waiting_for_kinesis(settings: Settings, attempts: int = SETUP_ATTEMPTS) -> str:
    """The line a command prints before its first Kinesis call: what it waits for, and how long at most.

    Raises:
        ServiceUnavailableError, ConfigError: As :func:`resolve_endpoint` does.
    """
    return (
        f"waiting for the Kinesis endpoint {_where(kinesis_connection(settings))} (at most "
        f"{settings.kinesis_timeout:g} s a call, {_tries(attempts)}: {ENV_PREFIX}KINESIS_TIMEOUT) ..."
    )


def unanswered(settings: Settings, error: Exception, attempts: int = SETUP_ATTEMPTS) -> ServiceUnavailableError | None:
    """The one-line error for a Kinesis endpoint that refused, or never answered, a call; None for other errors.

    Args:
        settings: Name the endpoint and the timeout.
        error: What botocore raised.
        attempts: The tries the call had.
    """
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

    connection = kinesis_connection(settings)
    where = connection.endpoint or f"AWS Kinesis in {connection.region}"
    waited = f"{settings.kinesis_timeout:g} s ({_tries(attempts)})"
    longer = f"or give a slow one longer with {ENV_PREFIX}KINESIS_TIMEOUT (seconds)."
    if isinstance(error, ReadTimeoutError):
        what = (
            f"it accepted the connection, then said nothing for {waited}. Check that it is a Kinesis endpoint, {longer}"
        )
    elif isinstance(error, ConnectTimeoutError):
        what = f"no connection within {waited}. Check the address and the network, {longer}"
    elif isinstance(error, EndpointConnectionError):
        start = f" Start it with: {START_COMMAND}" if settings.profile == "local" else ""
        what = f"nothing accepts connections there ({error}).{start}"
    else:
        return None
    return ServiceUnavailableError(f"Kinesis at {where} does not answer: {what}")


def check_kinesis(settings: Settings) -> str:
    """Check that Kinesis answers (one try of ``kinesis_timeout``); return a one-line description.

    Raises:
        ServiceUnavailableError: If the endpoint does not answer.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    connection = kinesis_connection(settings)
    where = connection.endpoint or f"AWS Kinesis in {connection.region}"
    try:
        setup_client(settings, attempts=CHECK_ATTEMPTS).list_streams(Limit=1)
    except (BotoCoreError, ClientError) as error:
        hint = f" Start it with: {START_COMMAND}" if settings.profile == "local" else ""
        raise unanswered(settings, error, CHECK_ATTEMPTS) or ServiceUnavailableError(
            f"Kinesis at {where} does not answer ({error}).{hint}"
        ) from None
    return f"Kinesis answers at {where}"


def check_shard_count(count: int, name: str = "shard count") -> int:
    """Return ``count`` if a stream may have that many shards.

    Raises:
        ConfigError: Naming ``name`` (``--shards`` for the command line) and the range.
    """
    if not 1 <= count <= MAX_SHARD_COUNT:
        raise ConfigError(
            f"{name} {count}: a stream has 1 to {MAX_SHARD_COUNT} shards (the settings' cap, an account's default "
            "shard quota); give a number in that range."
        )
    return count


def ensure_stream(settings: Settings, shard_count: int | None = None, timeout: float = 120.0) -> dict[str, Any]:
    """Create the stream unless it exists, and wait until it is ACTIVE (idempotent).

    Args:
        settings: Names the stream, and an optional KMS key for server-side encryption.
        shard_count: Shards for a new stream (default ``settings.shard_count``); an existing
            stream keeps its shards.
        timeout: Seconds to wait for ACTIVE.

    Returns:
        The stream summary (``DescribeStreamSummary``'s ``StreamDescriptionSummary``).

    Raises:
        ConfigError: If ``shard_count`` is outside 1 to 500 (checked before anything is created).
        ServiceUnavailableError: If Kinesis does not answer (each call: :data:`SETUP_ATTEMPTS` tries of
            ``kinesis_timeout``) or the stream does not become active.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    shards = check_shard_count(settings.shard_count if shard_count is None else shard_count)
    client = setup_client(settings)
    name = settings.stream_name

    def wait_until_active() -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            summary = client.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
            if summary["StreamStatus"] == "ACTIVE":
                return summary
            if time.monotonic() > deadline:
                raise ServiceUnavailableError(
                    f"Stream {name} is still {summary['StreamStatus']} after {timeout:.0f} s."
                )
            time.sleep(0.5)

    try:
        # An existing stream is kept as it is (ResourceInUse), whatever its shard count.
        with contextlib.suppress(client.exceptions.ResourceInUseException):
            client.create_stream(StreamName=name, ShardCount=shards)
        summary = wait_until_active()
        if settings.kms_key_id and summary.get("EncryptionType") != "KMS":
            client.start_stream_encryption(StreamName=name, EncryptionType="KMS", KeyId=settings.kms_key_id)
            summary = wait_until_active()  # starting encryption puts the stream in UPDATING for a while
    except (BotoCoreError, ClientError) as error:
        raise unanswered(settings, error) or ServiceUnavailableError(
            f"Could not create or describe stream {name}: {error}"
        ) from None
    return summary


def list_shards(client: Any, stream_name: str) -> list[dict[str, Any]]:
    """All shards of a stream, open and closed, following ListShards pagination.

    Args:
        client: A boto3 Kinesis client.
        stream_name: The stream.

    Returns:
        ListShards' shard records (ShardId, ParentShardId, HashKeyRange, SequenceNumberRange ...).
    """
    shards: list[dict[str, Any]] = []
    answer = client.list_shards(StreamName=stream_name)
    shards.extend(answer["Shards"])
    while answer.get("NextToken"):
        answer = client.list_shards(NextToken=answer["NextToken"])
        shards.extend(answer["Shards"])
    return shards


def hash_key(partition_key: str) -> int:
    """Where Kinesis puts a partition key: the MD5 of its UTF-8 bytes as a 128-bit unsigned integer."""
    return int.from_bytes(hashlib.md5(partition_key.encode("utf-8"), usedforsecurity=False).digest(), "big")


def shard_for_key(shards: list[dict[str, Any]], partition_key: str) -> str:
    """The open shard whose hash-key range holds ``partition_key``'s hash (what PutRecord's ShardId says).

    Args:
        shards: :func:`list_shards`' records (closed shards are skipped).
        partition_key: The key (the producer uses the user id).

    Raises:
        ValueError: If no open shard covers the hash (the list is incomplete).
    """
    key = hash_key(partition_key)
    for shard in shards:
        hash_range = shard["HashKeyRange"]
        is_open = "EndingSequenceNumber" not in shard["SequenceNumberRange"]
        if is_open and int(hash_range["StartingHashKey"]) <= key <= int(hash_range["EndingHashKey"]):
            return str(shard["ShardId"])
    raise ValueError(f"no open shard holds hash key {key}: list every shard of the stream")


def shard_table(shards: list[dict[str, Any]]) -> Any:
    """The shards as a small pandas table: id, parent, open, hash-key range and share, first sequence number.

    Hash keys are 39-digit numbers, so they are shown as text (a float would round them).
    """
    import pandas as pd

    rows = []
    for shard in shards:
        start, end = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
        sequence = shard["SequenceNumberRange"]
        rows.append(
            {
                "shard_id": shard["ShardId"],
                "parent": shard.get("ParentShardId"),
                "open": "EndingSequenceNumber" not in sequence,
                "starting_hash_key": str(start),
                "ending_hash_key": str(end),
                "hash_key_share": (end - start + 1) / 2**128,
                "starting_sequence_number": sequence["StartingSequenceNumber"],
            }
        )
    return pd.DataFrame(rows)


def peek_records(
    client: Any,
    stream_name: str,
    shard_id: str,
    iterator_type: str,
    limit: int = 3,
    *,
    sequence_number: str | None = None,
    timestamp: datetime | None = None,
) -> list[dict[str, Any]]:
    """Read a few records of one shard from an iterator of the given type (one GetShardIterator, one GetRecords).

    Args:
        client: A boto3 Kinesis client.
        stream_name: The stream.
        shard_id: The shard.
        iterator_type: ``TRIM_HORIZON``, ``LATEST``, ``AT_TIMESTAMP``, ``AT_SEQUENCE_NUMBER`` or
            ``AFTER_SEQUENCE_NUMBER``.
        limit: Records to read at most.
        sequence_number: For the two ``*_SEQUENCE_NUMBER`` types.
        timestamp: For ``AT_TIMESTAMP``.

    Returns:
        ``{"iterator": ..., "sequence_number", "arrival", "partition_key", "bytes"}`` per record.
    """
    options: dict[str, Any] = {"StreamName": stream_name, "ShardId": shard_id, "ShardIteratorType": iterator_type}
    if sequence_number is not None:
        options["StartingSequenceNumber"] = sequence_number
    if timestamp is not None:
        options["Timestamp"] = timestamp
    iterator = client.get_shard_iterator(**options)["ShardIterator"]
    records = client.get_records(ShardIterator=iterator, Limit=limit)["Records"]
    return [
        {
            "iterator": iterator_type,
            "sequence_number": record["SequenceNumber"],
            "arrival": record["ApproximateArrivalTimestamp"],
            "partition_key": record["PartitionKey"],
            "bytes": len(record["Data"]),
        }
        for record in records
    ]


def retention_hours(client: Any, stream_name: str) -> int:
    """How long the stream keeps a record (``RetentionPeriodHours``: 24 by default, up to 8,760)."""
    summary = client.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]
    return int(summary["RetentionPeriodHours"])
