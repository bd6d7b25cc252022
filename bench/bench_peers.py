"""Three pipelines, one topic, the same events: icestream on Kafka beside what users would pick instead.

Each pipeline runs as its own process tree, one at a time, in alternating order, on the same topic
of the local broker (its own broker for this run, ``bench_session(kafka=True)``):

- **icestream**: ``icestream ingest --source kafka`` (its defaults: dedupe, rejects table, positions
  in the table's commits);
- **spark**: Spark's plain job, ``readStream.format("kafka")`` → ``from_json`` →
  ``writeStream.format("iceberg")`` with a checkpoint (``icestream.jobs.kafka_to_iceberg --local``:
  the project's local session, nothing of icestream in the query);
- **connect**: Kafka Connect's standalone worker with Iceberg's sink, the reference configuration
  (``icestream.kafka.connect_worker``), 2 tasks for the topic's 2 partitions.

icestream's and Connect's tables are the events table's DDL (``hours(event_ts)``, created by this
script); Spark's is the one its ``toTable`` creates (unpartitioned). The events are the generator's,
without malformed records or resends: one record Iceberg's sink cannot convert stops its task
(docs/performance.md). Three measurements:

1. **Backlog**: ``--records`` events in the topic; each pipeline drains it into a new table ``--runs``
   times (icestream and Spark with ``availableNow``; Connect has no such mode, so its worker is
   started, and stopped once the table holds every event, its commit interval ``--connect-backlog-ms``).
   CPU of the process tree (user + system of every process in its session: Python, JVM, Python
   workers) from the start, JVM start included. Reported: wall seconds, rows per core-second, peak
   resident memory of the tree.
2. **Tip**: a background producer at ``--tip-rate`` events/s; each pipeline reads from the tip with
   a 1 s trigger (Connect: a 1 s commit interval), ``--tip-warmup`` s, then ``--tip-seconds`` measured:
   cores used.
3. **Freshness**: the same at ``--fresh-rate`` events/s, each at its own shortest sensible commit
   interval (``--fresh-triggers``: icestream 0.5 s and Spark 0.5 s triggers, Connect 1 s, below which
   the sink's coordinator round trip over its control topic leaves no room; not tried shorter here).
   Per row: its snapshot's ``committed_at`` minus its Kafka timestamp (``arrival_ts`` in all three
   tables), for the rows that arrived in the measured window (not the warm-up's). Connect's documented
   default commit interval is 5 minutes: at it a row waits half of that on average, by construction;
   not run here.

Ratios are against icestream measured in the same run. The machine is 2 shared cores: read the medians,
the ratios and the load average.

Run: ``.venv/bin/python bench/bench_peers.py`` (about 15 minutes), ``--quick`` for a tiny run.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_drain import TreeSampler
from bench_kinesis_source import row_freshness
from common import SCRATCH, banner, bench_session, command_line, load_average, shown, summary, tree_cpu, write_results

NAME = "peers"
PIPELINES = ("icestream", "spark", "connect")
LIVE_ORDER = ("connect", "icestream", "spark")
PARTITIONS = 2
GOALS = {"connect": 1.0, "spark": 0.8}  # icestream's rows per core-second against each, at least
POLL_SECONDS = 0.5
LIVE_BOUND_SECONDS = 3600.0  # a live run's own bound (--duration, --seconds): this script stops it long before


def fill_topic(settings: Any, records: int, seed: int = 7) -> int:
    """Send ``records`` generated events (no malformed records, no resends) to the settings' topic."""
    import confluent_kafka

    from icestream.kafka.connection import kafka_connection
    from icestream.synthetic.generator import backfill_config, generate

    connection = kafka_connection(settings)
    generated, _ = generate(backfill_config(hours=3, count=records, seed=seed, bad_rate=0.0, duplicate_rate=0.0))
    events = [record for record in generated if record.kind == "event"]
    producer = confluent_kafka.Producer(connection.client_config(**{"linger.ms": 20, "enable.idempotence": True}))
    for record in events:
        while True:
            try:
                producer.produce(connection.topic, value=record.data, key=record.partition_key.encode())
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise SystemExit("the topic did not take every event within 120 s")
    return len(events)


def new_table(spark: Any, settings: Any, pipeline: str) -> Any:
    """Settings naming a new table for ``pipeline`` (the events table's DDL, except Spark's, which its sink makes)."""
    from icestream.config import load_settings
    from icestream.lake.table import setup_tables

    made = load_settings(kafka_topic=settings.kafka_topic, table=f"peers_{pipeline}_{uuid.uuid4().hex[:8]}")
    if pipeline != "spark":
        setup_tables(spark, made)
    return made


def count_rows(spark: Any, table: str) -> int:
    spark.catalog.refreshTable(table)
    return int(spark.table(table).count())


def table_exists(spark: Any, table: str) -> bool:
    return bool(spark.catalog.tableExists(table))


def start_process(pipeline: str, target: Any, mode: str, trigger: float, seconds: float) -> subprocess.Popen[str]:
    """icestream's or Spark's pipeline as its own session; ``mode`` is ``backlog`` or ``live``."""
    environment = {**os.environ, "ICESTREAM_KAFKA_TOPIC": target.kafka_topic, "ICESTREAM_TABLE": target.table}
    if pipeline == "icestream":
        command = [str(Path(sys.executable).parent / "icestream"), "ingest", "--source", "kafka", "--quiet"]
        live_options = ["--trigger", f"{round(trigger * 1000)}ms", "--starting-position", "latest"]
        command += (
            ["--available-now", "--starting-position", "trim_horizon"]
            if mode == "backlog"
            else [*live_options, "--duration", str(seconds)]
        )
    else:
        from icestream.kafka.connection import kafka_connection

        checkpoint = SCRATCH / NAME / "checkpoints" / target.table
        command = [sys.executable, "-m", "icestream.jobs.kafka_to_iceberg", "--local", "--bootstrap",
                   kafka_connection(target).bootstrap, "--topic", target.kafka_topic, "--table", target.table_name,
                   "--checkpoint", str(checkpoint)]  # fmt: skip
        command += (
            ["--available-now", "--starting-offsets", "earliest"]
            if mode == "backlog"
            else ["--trigger", str(trigger), "--starting-offsets", "latest", "--seconds", str(seconds)]
        )
    log = (SCRATCH / NAME / f"{target.table}.log").open("w")
    return subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip


def start_connect(target: Any, commit_ms: int) -> tuple[Any, int]:
    """Connect's worker with the sink for ``target``; returns the worker and its pid."""
    from icestream.kafka.connect_worker import ConnectWorker, sink_spec
    from icestream.kafka.connection import kafka_connection

    worker = ConnectWorker.from_settings(target)
    worker.start(target, kafka_connection(target), sink_spec(target, PARTITIONS, commit_interval_ms=commit_ms))
    pid = worker.pid()
    if pid is None:
        raise SystemExit(f"the Connect worker is not running; see {worker.log}")
    return worker, pid


def drain(spark: Any, settings: Any, pipeline: str, records: int, args: argparse.Namespace) -> dict[str, Any]:
    """One backlog drain by ``pipeline`` into a new table: wall seconds, CPU of its tree, peak memory."""
    target = new_table(spark, settings, pipeline)
    began = time.perf_counter()
    if pipeline == "connect":
        worker, pid = start_connect(target, args.connect_backlog_ms)
        with TreeSampler(pid) as sampler:
            deadline = time.monotonic() + args.timeout
            while count_rows(spark, target.table_name) < records:
                if time.monotonic() > deadline:
                    worker.stop()
                    raise SystemExit(f"Connect did not write {records} rows in {args.timeout:.0f} s; see {worker.log}")
                time.sleep(POLL_SECONDS)
            seconds = time.perf_counter() - began
            cpu = sum(cpu for _, cpu in tree_cpu(pid).values())
        worker.stop()
    else:
        process = start_process(pipeline, target, "backlog", 0.0, 0.0)
        with TreeSampler(process.pid) as sampler:
            code = process.wait(timeout=args.timeout)
        seconds = time.perf_counter() - began
        if code != 0:
            raise SystemExit(f"{pipeline}'s drain failed ({code}); see {SCRATCH / NAME / (target.table + '.log')}")
        cpu = sum(sampler.cpu_by_kind().values())
    rows = count_rows(spark, target.table_name)
    return {"seconds": seconds, "cpu_seconds": cpu, "rows": rows, "rows_per_cpu_s": rows / cpu,
            "peak_mib": sampler.peak_mib}  # fmt: skip


def backlog(args: argparse.Namespace, spark: Any, settings: Any) -> dict[str, Any]:
    """Measurement 1: the same backlog drained by each pipeline, ``--runs`` times, alternating."""
    records = fill_topic(settings, args.records)
    print(f"\nbacklog: {records:,} events in {settings.kafka_topic} ({PARTITIONS} partitions)", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {pipeline: [] for pipeline in PIPELINES}
    for number in range(args.runs):
        order = PIPELINES[number % 3 :] + PIPELINES[: number % 3]
        for pipeline in order:
            done = drain(spark, settings, pipeline, records, args)
            runs[pipeline].append(done)
            print(f"  run {number + 1} {pipeline:>9}: {done['seconds']:6.1f} s, {done['cpu_seconds']:6.1f} CPU-s, "
                  f"{done['rows_per_cpu_s']:7.0f} rows/CPU-s, {done['rows']:,} rows, peak {done['peak_mib']:.0f} MiB",
                  flush=True)  # fmt: skip
    medians = {
        pipeline: {key: summary([run[key] for run in found]) for key in ("seconds", "cpu_seconds", "rows_per_cpu_s",
                                                                          "peak_mib")}
        for pipeline, found in runs.items()
    }  # fmt: skip
    own = medians["icestream"]["rows_per_cpu_s"]["median"]
    ratios = {pipeline: own / medians[pipeline]["rows_per_cpu_s"]["median"] for pipeline in ("spark", "connect")}
    return {"records": records, "runs": runs, "medians": medians, "icestream_rows_per_cpu_s_ratio": ratios}


def wait_for_rows(spark: Any, pipeline: str, target: Any, process: subprocess.Popen[str]) -> None:
    """Wait until the query has written (Spark's sink makes its table at its first batch)."""
    deadline = time.monotonic() + 120
    while not (table_exists(spark, target.table_name) and count_rows(spark, target.table_name)):
        if time.monotonic() > deadline or process.poll() is not None:
            raise SystemExit(f"{pipeline} wrote nothing; see {SCRATCH / NAME / (target.table + '.log')}")
        time.sleep(POLL_SECONDS)


def stop_live(worker: Any, process: subprocess.Popen[str] | None) -> None:
    """Stop a live run: the Connect worker, or the process group (SIGTERM, then SIGKILL)."""
    if worker is not None:
        worker.stop()
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def live(args: argparse.Namespace, spark: Any, settings: Any, rate: float, triggers: dict[str, float],
         warmup: float, seconds: float) -> dict[str, Any]:  # fmt: skip
    """A background producer at ``rate``; each pipeline from the tip in turn: cores, and per-row freshness."""
    from icestream.config import load_settings
    from icestream.kafka.connection import kafka_connection
    from icestream.kafka.topics import ensure_topic
    from icestream.producer.background import start_background_producer, stop_background_producer
    from icestream.queries.report import percentiles

    topic = load_settings(kafka_topic=f"peers-live-{uuid.uuid4().hex[:8]}")
    ensure_topic(kafka_connection(topic), PARTITIONS)
    total = 3 * (warmup + seconds + 60) + 120
    start_background_producer(topic, rate=rate, duration=total, to="kafka", bad_rate=0.0, duplicate_rate=0.0,
                              late_rate=0.0, seed=11)  # fmt: skip
    results: dict[str, Any] = {}
    try:
        time.sleep(3)  # the producer's first records are out
        # Connect first: a new sink starts at the topic's start (Connect's sinks reset to earliest), which holds
        # only the producer's first seconds then; the other two start at the tip.
        for pipeline in LIVE_ORDER:
            target = new_table(spark, topic, pipeline)
            trigger = triggers[pipeline]
            worker, process = None, None
            try:
                if pipeline == "connect":
                    worker, pid = start_connect(target, int(trigger * 1000))
                else:
                    process = start_process(pipeline, target, "live", trigger, LIVE_BOUND_SECONDS)
                    pid = process.pid
                    wait_for_rows(spark, pipeline, target, process)
                time.sleep(warmup)
                before = sum(cpu for _, cpu in tree_cpu(pid).values())
                wall, window_start = time.monotonic(), time.time()
                time.sleep(seconds)
                cores = (sum(cpu for _, cpu in tree_cpu(pid).values()) - before) / (time.monotonic() - wall)
                window_end = time.time()
                time.sleep(trigger + 2)  # what arrived in the window is committed
            finally:
                stop_live(worker, process)
            spark.catalog.refreshTable(target.table_name)  # this session loaded it at its first commit
            frame = row_freshness(spark, target.table_name, "arrival_ts")
            # The rows that arrived in the measured window: not the warm-up's (a JVM still compiling, a sink
            # catching up with the topic's first seconds), nor those after it.
            arrived = frame["committed"] - frame["freshness_s"]
            steady = frame[(arrived >= window_start) & (arrived < window_end)]
            figures = {"trigger_s": trigger, "cores": round(cores, 3), "rows": len(steady),
                       "snapshots": int(steady["snapshot_id"].nunique()),
                       **percentiles(steady["freshness_s"])}  # fmt: skip
            results[pipeline] = figures
            quantiles = ", ".join(f"{key} {figures[key]:.2f} s" for key in ("p50", "p95") if key in figures)
            print(f"  {pipeline:>9} at {trigger:g} s: {cores:.3f} cores; freshness {quantiles} "
                  f"({figures['rows']} rows in {figures['snapshots']} snapshots)", flush=True)  # fmt: skip
    finally:
        stop_background_producer(topic)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="the backlog's events")
    parser.add_argument("--runs", type=int, default=2, help="drains of the backlog per pipeline")
    parser.add_argument("--connect-backlog-ms", type=int, default=1000, help="Connect's commit interval while draining")
    parser.add_argument("--timeout", type=float, default=900.0, help="a drain fails after this long")
    parser.add_argument("--tip-rate", type=float, default=100.0)
    parser.add_argument("--tip-warmup", type=float, default=45.0, help="seconds each tip run goes before measuring")
    parser.add_argument("--tip-seconds", type=float, default=30.0, help="seconds measured per tip run")
    parser.add_argument("--fresh-rate", type=float, default=500.0)
    parser.add_argument("--fresh-triggers", default="icestream=0.5,spark=0.5,connect=1",
                        help="each pipeline's trigger or commit interval for freshness (s)")  # fmt: skip
    parser.add_argument("--fresh-warmup", type=float, default=20.0, help="seconds each freshness run goes first")
    parser.add_argument("--fresh-seconds", type=float, default=25.0, help="seconds measured per freshness run")
    parser.add_argument("--only", default="backlog,tip,freshness", help="comma-separated: backlog, tip, freshness")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: does it run? (figures mean little)")
    args = parser.parse_args()
    if args.quick:
        args.records, args.runs = 5_000, 1
        args.tip_warmup, args.tip_seconds, args.fresh_warmup, args.fresh_seconds = 8.0, 6.0, 6.0, 6.0
    only = set(args.only.split(","))
    pairs = (pair.split("=") for pair in args.fresh_triggers.split(","))
    fresh_triggers = {name: float(value) for name, value in pairs}

    facts = banner("icestream on Kafka beside Spark's plain job and Kafka Connect's Iceberg sink", command_line())
    result: dict[str, Any] = {"machine": facts, "command": command_line(), "partitions": PARTITIONS, "goals": GOALS,
                              "fresh_triggers_s": fresh_triggers}  # fmt: skip
    (SCRATCH / NAME).mkdir(parents=True, exist_ok=True)
    with bench_session(NAME, kafka=True) as (_settings, spark):
        from icestream.config import load_settings
        from icestream.kafka.connection import kafka_connection
        from icestream.kafka.topics import ensure_topic

        (SCRATCH / NAME).mkdir(parents=True, exist_ok=True)  # bench_session made the folder anew
        topic = load_settings(kafka_topic=f"peers-{uuid.uuid4().hex[:8]}")
        ensure_topic(kafka_connection(topic), PARTITIONS)
        if "backlog" in only:
            result["backlog"] = backlog(args, spark, topic)
        if "tip" in only:
            print(f"\ntip: {args.tip_rate:g} events/s, 1 s triggers and commit interval", flush=True)
            result["tip"] = live(args, spark, topic, args.tip_rate, dict.fromkeys(PIPELINES, 1.0), args.tip_warmup,
                                 args.tip_seconds)  # fmt: skip
        if "freshness" in only:
            print(f"\nfreshness: {args.fresh_rate:g} events/s", flush=True)
            result["freshness"] = live(args, spark, topic, args.fresh_rate, fresh_triggers, args.fresh_warmup,
                                       args.fresh_seconds)  # fmt: skip

    print("\nsummary (medians; ratios are icestream against each)")
    if "backlog" in result:
        found = result["backlog"]
        for pipeline in PIPELINES:
            median = found["medians"][pipeline]
            print(f"  backlog {pipeline:>9}: {shown(median['rows_per_cpu_s'], ' rows/CPU-s', 0)}; wall "
                  f"{shown(median['seconds'], ' s', 1)}; peak {median['peak_mib']['median']:.0f} MiB")  # fmt: skip
        for pipeline, ratio in found["icestream_rows_per_cpu_s_ratio"].items():
            verdict = "met" if ratio >= GOALS[pipeline] else "NOT met"
            print(f"  rows per core-second, icestream / {pipeline}: {ratio:.2f} (goal >= {GOALS[pipeline]}: {verdict})")
    for phase in ("tip", "freshness"):
        if phase in result:
            found = result[phase]
            own = found["icestream"]
            for pipeline in ("spark", "connect"):
                other = found[pipeline]
                print(f"  {phase} cores, icestream / {pipeline}: {own['cores'] / other['cores']:.2f} "
                      f"({own['cores']:.3f} against {other['cores']:.3f})")  # fmt: skip
                if phase == "freshness" and "p95" in own and "p95" in other:
                    print(f"  freshness p95, icestream / {pipeline}: {own['p95'] / other['p95']:.2f} "
                          f"({own['p95']:.2f} s at {own['trigger_s']:g} s against {other['p95']:.2f} s at "
                          f"{other['trigger_s']:g} s)")  # fmt: skip
    result["load_average_at_end"] = load_average()
    print(f"  load average at the end: {result['load_average_at_end']}")
    write_results(NAME, result)


if __name__ == "__main__":
    main()
