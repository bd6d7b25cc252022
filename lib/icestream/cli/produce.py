"""``icestream produce``: generated events to Kinesis or Kafka: live, a backfill, a file, or in the background."""

from __future__ import annotations

import argparse
from pathlib import Path

from icestream.config import load_settings
from icestream.errors import ConfigError


def cmd_produce(args: argparse.Namespace) -> int:
    """Generate records and send them: live (default), a history backfill, a file; or in the background.

    The first line says what is sent, at what rate and why; the last one where every record went
    (see :mod:`icestream.producer.plan` for what ``--count`` and ``--rate`` mean in each mode).
    """
    import json
    import secrets

    from icestream.kinesis.clients import kinesis_client, list_shards
    from icestream.producer import background
    from icestream.producer.aggregate import Aggregator, open_shard_starts
    from icestream.producer.plan import live_rate, plan_production
    from icestream.producer.put import producer_client
    from icestream.producer.run import run_production, run_summary_path
    from icestream.producer.target import KAFKA
    from icestream.synthetic.second_kind import as_options, tables_truth_path

    kafka = args.to == KAFKA
    if args.stream and kafka:
        raise ConfigError("--stream names a Kinesis stream; with --to kafka name the topic with --topic.")
    if args.topic and not kafka:
        raise ConfigError("--topic names a Kafka topic: add --to kafka, or name a Kinesis stream with --stream.")
    if args.aggregate is not None and kafka:
        raise ConfigError(
            "--aggregate packs records in Kinesis's KPL format; Kafka batches records itself: "
            "leave out --aggregate with --to kafka."
        )
    overrides = {"stream_name": args.stream} if args.stream else {}
    if args.topic:
        overrides["kafka_topic"] = args.topic
    if args.profile:
        overrides["profile"] = args.profile
    settings = load_settings(config_file=args.config, **overrides)
    if args.stop:
        print("stopped" if background.stop_background_producer(settings) else "not running")
        return 0
    if args.status:
        status = background.background_producer_status(settings)
        print(status.detail + (f" (pid {status.pid}, log {status.log})" if status.pid else ""))
        if status.summary:
            print(json.dumps(status.summary.producer.table()))
        return 0
    seed = args.seed if args.seed is not None else secrets.randbits(31)
    mix = {"bad_rate": args.bad_rate, "duplicate_rate": args.duplicate_rate, "late_rate": args.late_rate}
    second_kind = as_options(args.orders, args.new_field_after)
    if second_kind and args.from_file:
        raise ConfigError("--orders and --new-field-after shape generated records; leave them out with --from-file.")
    mix.update(second_kind)
    packing = args.aggregate is not None or args.compress is not None
    if args.background:
        if second_kind:
            raise ConfigError(
                "--orders and --new-field-after are for foreground runs; leave them out with --background"
            )
        if packing:
            raise ConfigError("--aggregate and --compress are for foreground runs; leave them out with --background.")
        if args.from_file or args.backfill_hours:
            raise ConfigError("--background runs live production only; leave out --from-file and --backfill-hours.")
        writes = kinesis_client(settings) if not kafka else None  # the write limit is Kinesis's
        rate, why = live_rate(writes, settings.stream_name, args.count, args.rate, args.to)
        status = background.start_background_producer(
            settings,
            to=args.to,
            rate=rate,
            duration=args.duration,
            count=args.count,
            seed=seed,
            anomalies=args.anomalies or "none",
            **mix,
        )
        print(
            f"background producer started (pid {status.pid}) at {rate:,.0f} records/s ({why}); {status.detail}; "
            f"log {status.log}"
        )
        return 0
    # Made before the plan: a live window starts when it is planned (confluent-kafka's is made by the sender).
    client = producer_client(settings) if not kafka else None
    plan = plan_production(
        settings,
        seed=seed,
        mix=mix,
        count=args.count,
        rate=args.rate,
        duration=args.duration,
        from_file=Path(args.from_file) if args.from_file else None,
        backfill_hours=args.backfill_hours,
        anomalies=args.anomalies,
        client=client,
        to=args.to,
    )
    print(plan.description, flush=True)
    aggregator = None
    if packing:
        aggregator = Aggregator(
            per_aggregate=args.aggregate or 1,
            compression=args.compress,
            shard_starts=open_shard_starts(list_shards(client, settings.stream_name)) if not kafka else (),
        )
    summary = run_production(
        settings,
        plan.records,
        mode=plan.mode,
        generator=plan.generator,
        client=client,
        progress=not args.no_progress,
        total=args.count if args.aggregate is None else None,  # the bar counts Kinesis records
        aggregator=aggregator,
        summary_file=Path(args.summary_file) if args.summary_file else None,
        stop_on_sigterm=True,
        to=args.to,
        **plan.options,
    )
    print(f"{plan.mode}: {summary.producer.line()}; summary in {run_summary_path(settings, plan.mode)}")
    if aggregator is not None:
        print(
            f"{aggregator.user_records} user records in {aggregator.aggregates} KPL aggregates "
            f"(up to {aggregator.per_aggregate} each), compression {aggregator.compression or 'none'}"
        )
    if summary.ground_truth is not None:
        print(f"seed {summary.seed}; ground truth of {len(summary.anomalies)} anomalies in {summary.ground_truth}")
    if second_kind:
        print(f"truth per table (events, orders, the new field's rows) in {tables_truth_path(settings)}")
    return 1 if summary.producer.failed else 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to the ``icestream`` parser."""
    from icestream.producer.target import KINESIS, TARGETS

    produce = commands.add_parser(
        "produce", help="generate events and send them to Kinesis or Kafka (live, backfill, file)"
    )
    produce.add_argument(
        "--count", type=int, help="records to send, exactly (events, duplicates and malformed ones; file: lines)"
    )
    produce.add_argument(
        "--rate",
        type=float,
        help="records/s: live, the pace (default: the write limit with --count, 50 with --duration); "
        "backfill and file, a cap (default none)",
    )
    produce.add_argument("--duration", type=float, help="live: seconds to run (or --count); backfill, file: a cap")
    produce.add_argument("--from-file", help="send a JSON-lines file of payloads as they are")
    produce.add_argument("--backfill-hours", type=float, help="history mode: event times over the last N hours")
    produce.add_argument("--anomalies", help="'default', 'none' or e.g. spike:search:4,drop:add_to_cart:0.1@60+15")
    produce.add_argument("--bad-rate", type=float, default=0.005, help="malformed records per event (default 0.005)")
    produce.add_argument("--duplicate-rate", type=float, default=0.01, help="share of events sent twice (default 0.01)")
    produce.add_argument("--late-rate", type=float, default=0.02, help="share of events sent late (default 0.02)")
    produce.add_argument(
        "--orders",
        type=float,
        metavar="R",
        help="also send order events (event_type 'order') at R per second, on top of --count (default none)",
    )
    produce.add_argument(
        "--new-field-after",
        type=float,
        metavar="S",
        help="user events carry a top-level app_version from S seconds after the window start (default never)",
    )
    produce.add_argument("--seed", type=int, help="generator seed (default: random; printed for reproduction)")
    produce.add_argument(
        "--to",
        choices=TARGETS,
        default=KINESIS,
        help="the Kinesis stream (default) or the Kafka topic (kafka_topic, on kafka_bootstrap or the local broker)",
    )
    produce.add_argument("--stream", help="stream name (default: settings)")
    produce.add_argument("--topic", help="with --to kafka: the topic (default: settings' kafka_topic)")
    produce.add_argument(
        "--summary-file", help="also write the JSON summary here (always in <run_dir>/produce_<mode>_summary.json)"
    )
    produce.add_argument("--no-progress", action="store_true", help="no progress bar")
    produce.add_argument(
        "--aggregate",
        type=int,
        metavar="N",
        help="pack N user records per Kinesis record in the KPL aggregated format (within the 1 MiB limit)",
    )
    produce.add_argument(
        "--compress", choices=("gzip", "zlib"), help="compress each payload (gzip, as CloudWatch Logs sends)"
    )
    control = produce.add_mutually_exclusive_group()
    control.add_argument("--background", action="store_true", help="run live production detached, for --duration s")
    control.add_argument("--stop", action="store_true", help="stop the background producer")
    control.add_argument("--status", action="store_true", help="report the background producer")
    produce.set_defaults(handler=cmd_produce)
