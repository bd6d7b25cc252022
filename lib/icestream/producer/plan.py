"""What one ``icestream produce`` run will send, at what rate, and the first line that says so.

The modes and what their numbers mean (docs/commands.md and notebook 01 show the same table):

========== ==================================== =========================================================
mode       ``--count N``                        ``--rate R`` (records per second, every kind)
========== ==================================== =========================================================
live       exactly N records (events, their     R on average, event time = now; without it: the stream's
           duplicates and malformed records);   write limit (1,000 records/s per open shard) for a count,
           late events are sent within the run  50/s for a ``--duration``
backfill   exactly N records, spread over the   a cap on the send rate; without it, as fast as Kinesis
           whole history                        takes them
file       the first N payloads of the file     a cap on the send rate, as for a backfill
========== ==================================== =========================================================

With ``--to kafka`` the same records go to the Kafka topic, and the rates read the same but for one:
a topic has no write limit per partition, so a live ``--count`` without ``--rate`` takes 50/s.
``--background`` runs live production in its own process, with the same meaning of N and R. Every
run's summary counts ``records == sent + failed + unsendable + unsent``: nothing is held back.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icestream.config import Settings
from icestream.errors import ConfigError, ServiceUnavailableError
from icestream.limits import MAX_RECORDS_PER_SHARD_SECOND
from icestream.producer.target import KINESIS, check_target, destination, service
from icestream.synthetic import generator as synthetic
from icestream.synthetic.ground_truth import parse_anomalies
from icestream.synthetic.wire import Record, read_records

DEFAULT_LIVE_RATE = 50.0  # records per second of a live run given a duration and no rate


@dataclass(frozen=True)
class ProductionPlan:
    """One run, ready for :func:`icestream.producer.run.run_production`.

    Attributes:
        mode: ``live``, ``backfill`` or ``file``.
        records: What to send.
        generator: The generator behind ``records`` (None for a file).
        options: Keyword arguments for ``run_production`` (pacing, rate limit, duration ...).
        description: One line: what is sent where, at what rate and why.
    """

    mode: str
    records: Iterable[Record]
    generator: synthetic.EventGenerator | None
    options: dict[str, Any] = field(default_factory=dict)
    description: str = ""


def write_limit(client: Any, stream_name: str) -> tuple[float, str]:
    """The stream's write limit in records per second, and how it follows from the open shards.

    Raises:
        ServiceUnavailableError: If the stream cannot be described (missing, or Kinesis unreachable).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        shards = client.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]["OpenShardCount"]
    except (BotoCoreError, ClientError) as error:
        raise ServiceUnavailableError(
            f"Could not describe stream {stream_name}: {error}. Create it with `icestream setup`."
        ) from None
    return float(shards * MAX_RECORDS_PER_SHARD_SECOND), f"{shards} open shards x {MAX_RECORDS_PER_SHARD_SECOND:,}/s"


def live_rate(
    client: Any, stream_name: str, count: int | None, rate: float | None, to: str = KINESIS
) -> tuple[float, str]:
    """The rate of a live run, and why: ``--rate``, else the stream's write limit for a count, else the default.

    A Kafka topic has no write limit per partition to go by: without ``--rate`` its live runs take the
    default rate (``client`` is not used then).

    Returns:
        Records per second, and the reason in words (for the run's first line).
    """
    if rate is not None:
        if not rate > 0:
            raise ConfigError(f"--rate {rate}: give a positive number of records per second.")
        return rate, "--rate"
    if count and check_target(to) == KINESIS:
        limit, shards = write_limit(client, stream_name)
        return limit, f"no --rate, so the stream's write limit: {shards}"
    return DEFAULT_LIVE_RATE, "no --rate, the default live rate"


def _send_rate(rate: float | None, to: str) -> str:
    return f"at most {rate:,.0f} records/s (--rate)" if rate else f"as fast as {service(to)} takes them (no --rate)"


def plan_production(
    settings: Settings,
    *,
    seed: int,
    mix: Mapping[str, Any],
    count: int | None = None,
    rate: float | None = None,
    duration: float | None = None,
    from_file: Path | None = None,
    backfill_hours: float | None = None,
    anomalies: str | None = None,
    client: Any | None = None,
    to: str = KINESIS,
) -> ProductionPlan:
    """Decide what a produce run sends (see the module docstring for the meaning of each number).

    Args:
        settings: Names the stream (or the topic).
        seed: The generator's seed.
        mix: ``bad_rate``, ``duplicate_rate``, ``late_rate`` (and ``order_rate``, ``new_field_after`` when set).
        count: Records to send, exactly.
        rate: Records per second (see the table).
        duration: Live: seconds to run; backfill and file: stop sending after this long.
        from_file: Send this JSON-lines file's payloads.
        backfill_hours: Send history: event times over this many hours before now.
        anomalies: Anomalies to inject (``default`` for a backfill when None, none for live).
        client: A Kinesis client, to read the write limit (default: one for the active profile).
        to: ``kinesis`` or ``kafka`` (:mod:`icestream.producer.target`): where the plan says it sends.

    Returns:
        The plan.

    Raises:
        ConfigError: If the options do not fit together, or a file holds fewer payloads than ``count``.
    """
    from icestream.kinesis.clients import kinesis_client

    stream = destination(settings, to)
    stream = stream if to == KINESIS else f"Kafka topic {stream}"
    if count is not None and count < 1:
        raise ConfigError(f"--count {count}: give at least 1 record.")
    if from_file:
        payloads = sum(1 for _ in read_records(from_file))
        if count and count > payloads:
            raise ConfigError(f"--count {count}: {from_file} holds only {payloads} payloads.")
        records: Iterable[Record] = itertools.islice(read_records(from_file), count)
        what = f"the first {count} of {payloads}" if count else f"all {payloads}"
        description = f"file: {what} payloads of {from_file} to {stream}, {_send_rate(rate, to)}"
        return ProductionPlan("file", records, None, {"rate_limit": rate, "duration": duration}, description)
    if backfill_hours:
        specs = parse_anomalies(anomalies or "default")
        config = synthetic.backfill_config(backfill_hours, records=count, seed=seed, anomalies=specs, **mix)
        what = f"{count} records" if count else f"about {config.rate * config.seconds * config.records_per_event:,.0f}"
        how = f"over the {backfill_hours:g} h before now to {stream}, {_send_rate(rate, to)}"
        return _generated("backfill", config, f"{what} {how}", {"rate_limit": rate, "duration": duration})
    if (count is None) == (duration is None):
        raise ConfigError("live production needs --count RECORDS or --duration SECONDS (one of them), so that it ends.")
    kinesis = (client or kinesis_client(settings)) if to == KINESIS else None  # the write limit is Kinesis's
    per_second, why = live_rate(kinesis, settings.stream_name, count, rate, to)
    config = synthetic.live_config(
        per_second, seconds=duration, records=count, seed=seed, anomalies=parse_anomalies(anomalies), **mix
    )
    what = f"{count} records" if count else f"{duration:g} s"
    how = f"to {stream} at {per_second:,.0f} records/s ({why}), about {config.seconds:,.0f} s"
    return _generated("live", config, f"{what} {how}", {"append_truth": True, "pace": True})


def _generated(mode: str, config: synthetic.GeneratorConfig, what: str, options: dict[str, Any]) -> ProductionPlan:
    source = synthetic.EventGenerator(config)
    return ProductionPlan(mode, source, source, options, f"{mode}: {what}; run {source.run_id}")
