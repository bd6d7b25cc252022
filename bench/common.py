"""Shared helpers for the benchmarks: machine facts, medians, results as JSON, a private environment.

Every benchmark prints the command that reproduces it and the machine it ran on, measures a
baseline in the same run, and reports medians and ratios (these machines are noisy). Each one runs
in its own process with one SparkSession, its own emulator and a scratch warehouse under
``bench/results/tmp/`` (gitignored), so benchmarks never touch ``data/`` or each other.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from icestream.config import ICEBERG_VERSION  # the runtime jar the session uses (docs/stack.md)

BENCH = Path(__file__).resolve().parent
SCRATCH = BENCH / "results" / "tmp"  # gitignored: warehouses and emulator state of benchmark runs
# Where results go: bench/results/, or a folder of a run that must not replace them (bench/smoke.py).
RESULTS = Path(os.environ.get("ICESTREAM_BENCH_RESULTS") or BENCH / "results")


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, so a reader can judge how noisy the machine was."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def machine() -> dict[str, Any]:
    """Cores, memory, load and versions of what is measured."""
    import importlib.metadata

    memory_kib = next(
        (
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024**2, 1),
        "load_average": load_average(),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "java": java[0] if java else "unknown",
        "pyspark": importlib.metadata.version("pyspark"),
        "iceberg": ICEBERG_VERSION,
        "moto": importlib.metadata.version("moto"),
        "duckdb": importlib.metadata.version("duckdb"),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def banner(name: str, command: str) -> dict[str, Any]:
    """Print what runs, how to reproduce it and on what; return the machine facts."""
    facts = machine()
    print(f"== {name}")
    print(f"reproduce: {command}")
    print("machine:  " + ", ".join(f"{key} {value}" for key, value in facts.items()), flush=True)
    return facts


def summary(values: list[float]) -> dict[str, float]:
    """Median, min and max of repeated measurements."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def shown(stats: dict[str, float], unit: str = "", digits: int = 2) -> str:
    """``median 1.23 s (min 1.10, max 1.50, 3 runs)``."""
    return (
        f"median {stats['median']:.{digits}f}{unit} (min {stats['min']:.{digits}f}, "
        f"max {stats['max']:.{digits}f}, {stats['runs']} runs)"
    )


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of one call, and its result."""
    began = time.perf_counter()
    result = action()
    return time.perf_counter() - began, result


def write_results(name: str, payload: dict[str, Any]) -> Path:
    """Write ``bench/results/<name>.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"results:  {path.relative_to(BENCH.parent)}")
    return path


def private_environment(name: str, fresh: bool = True) -> dict[str, str]:
    """Point icestream at a scratch warehouse and run folder for this benchmark (never data/).

    Args:
        name: Folder under ``bench/results/tmp/``.
        fresh: Remove what an earlier run left there first.
    """
    home = SCRATCH / name
    if fresh and home.exists():
        shutil.rmtree(home)
    values = {
        "ICESTREAM_WAREHOUSE": str(home / "warehouse"),
        "ICESTREAM_RUN_DIR": str(home / "run"),
        "ICESTREAM_OUTPUT_DIR": str(home / "output"),
        "ICESTREAM_SPARK_LOG_LEVEL": "ERROR",
    }
    os.environ.update(values)
    return values


def command_line() -> str:
    """How this process was started, for the reproduce line."""
    return " ".join([".venv/bin/python", *[arg if " " not in arg else repr(arg) for arg in sys.argv]])


@contextlib.contextmanager
def bench_session(
    name: str, shards: int = 4, spark: bool = True, write_limits: bool = False, kafka: bool = False
) -> Iterator[tuple[Any, Any]]:
    """A private environment, its own emulator (and with ``kafka`` its own Kafka broker) and the process's
    SparkSession; all stopped afterwards.

    Without Kinesis's per-shard write limits unless ``write_limits``: the benchmarks fill streams as fast
    as the emulator takes records and measure icestream, not the 1,000 records/s a shard accepts.

    Yields:
        ``(settings, spark)`` (spark is None when not asked for).
    """
    private_environment(name)
    from icestream.config import load_settings
    from icestream.kinesis.emulator import Emulator
    from icestream.producer.background import stop_background_producer

    settings = load_settings(stream_name=f"bench-{uuid.uuid4().hex[:8]}", shard_count=shards)
    emulator = Emulator(settings.path("run_dir"))
    os.environ["ICESTREAM_EMULATOR_WRITE_LIMITS"] = "true" if write_limits else "false"  # what notebooks read
    emulator.start(write_limits=write_limits)
    from icestream.kafka.broker import Broker

    broker = Broker.from_settings(settings) if kafka else None
    if broker is not None:
        broker.start()
    try:
        session = None
        if spark:
            from icestream.runtime.spark import get_spark

            session = get_spark(settings, app_name=f"icestream-bench-{name}")
        yield settings, session
    finally:
        stop_background_producer(settings)
        emulator.stop()
        if broker is not None:
            broker.stop()


def line_records(count: int, seed: int = 7) -> list[Any]:
    """The generator's records (3 hours of backfill) that Kinesis would accept and that fit one JSON
    line each (a payload with a newline byte cannot be a line): both sides of a native-load comparison."""
    from icestream.synthetic.generator import backfill_config, generate

    generated, _ = generate(backfill_config(hours=3, count=count, seed=seed))
    return [r for r in generated if r.kind != "kinesis_oversized" and b"\n" not in r.data and b"\r" not in r.data]


def fill_stream(settings: Any, records: int, shards: int, seed: int = 7) -> int:
    """Create the stream with ``shards`` shards and send about ``records`` generated records to it.

    Returns:
        Records Kinesis accepted (the generator adds duplicates and malformed records on purpose).
    """
    from icestream.kinesis.clients import ensure_stream
    from icestream.producer.put import produce
    from icestream.synthetic.generator import backfill_config, generate

    ensure_stream(settings, shard_count=shards)
    generated, _ = generate(backfill_config(hours=3, count=records, seed=seed))
    return produce(settings, generated, progress=False).sent


def bare_client(settings: Any) -> Any:
    """A plain ``boto3`` Kinesis client with botocore's defaults: the issue's "bare boto3 loop"."""
    import boto3

    from icestream.config import EMULATOR_DUMMY_KEYS
    from icestream.kinesis.clients import kinesis_connection

    connection = kinesis_connection(settings)
    keys = EMULATOR_DUMMY_KEYS.get(connection.profile)
    credentials = {"aws_access_key_id": keys[0], "aws_secret_access_key": keys[1]} if keys else {}
    return boto3.client("kinesis", region_name=connection.region, endpoint_url=connection.endpoint, **credentials)


def raw_drain(settings: Any, bare: bool = True) -> int:
    """Read every shard to its end with one GetRecords loop, shard after shard: the ceiling.

    Args:
        settings: Names the stream.
        bare: A plain boto3 client (:func:`bare_client`), else the client the ingest's read tasks
            use (``icestream.kinesis.clients``: the same, with a cheaper timestamp parser).
    """
    from icestream.kinesis.clients import kinesis_client, list_shards

    client = bare_client(settings) if bare else kinesis_client(settings)
    return sum(_drain_shard(client, settings, shard["ShardId"]) for shard in list_shards(client, settings.stream_name))


def _drain_shard(client: Any, settings: Any, shard_id: str) -> int:
    iterator = client.get_shard_iterator(
        StreamName=settings.stream_name, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    total = 0
    while iterator:
        answer = client.get_records(ShardIterator=iterator, Limit=10_000)
        total += len(answer["Records"])
        if not answer["Records"] and answer.get("MillisBehindLatest", 0) == 0:
            break
        iterator = answer.get("NextShardIterator")
    return total


_POOL_CLIENT: list[Any] = []  # the one client of a parallel_drain pool process, made before the clock


def _drain_shard_in_process(settings: Any, shard_id: str) -> int:
    if not _POOL_CLIENT:  # a process the warm-up did not reach
        _warm(settings)
    return _drain_shard(_POOL_CLIENT[0], settings, shard_id)


def _warm(settings: Any) -> None:
    _POOL_CLIENT[:] = [bare_client(settings)]  # imports boto3 and loads the service model


def parallel_drain(settings: Any) -> tuple[int, float]:
    """The bare loop in one process per shard, as many at once as there are cores: a ceiling that
    reads shards side by side, as the ingest's read tasks do.

    Returns:
        Records read and the seconds reading took (the processes start, and import boto3, before the clock).
    """
    from concurrent.futures import ProcessPoolExecutor

    from icestream.kinesis.clients import list_shards

    shards = [shard["ShardId"] for shard in list_shards(bare_client(settings), settings.stream_name)]
    workers = min(len(shards), os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=workers, initializer=_warm, initargs=(settings,)) as pool:
        list(pool.map(_warm, [settings] * workers))  # every process started (and its client made)
        began = time.perf_counter()
        total = sum(pool.map(_drain_shard_in_process, [settings] * len(shards), shards))
        return total, time.perf_counter() - began


def new_table_settings(stream_name: str, prefix: str = "bench") -> Any:
    """Settings naming a fresh events table (and its rejects table) for ``stream_name``."""
    from icestream.config import load_settings

    return load_settings(stream_name=stream_name, table=f"{prefix}_{uuid.uuid4().hex[:8]}")


def ingest_call_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with :func:`run_ingest`'s defaults: a drain (``available_now``) unless a batch count
    or a duration bounds the query; a drain's batches back to back, a bounded query's at the ingest's
    shortest trigger (a trigger under it is refused: 0 s stopped two benchmarks from 2026-11-26 to 11-28)."""
    from icestream.ingest.options import MIN_TRIGGER_SECONDS

    chosen = dict(options)
    chosen.setdefault("available_now", "max_batches" not in options and "duration_seconds" not in options)
    chosen.setdefault("trigger_seconds", 0 if chosen["available_now"] else MIN_TRIGGER_SECONDS)
    return chosen


def run_ingest(spark: Any, target: Any, **options: Any) -> dict[str, Any]:
    """Run the ingest query on ``target`` (stream and tables) until its options stop it; time it.

    Args:
        spark: The session.
        target: Settings naming the stream and the tables (created here if missing).
        **options: :class:`icestream.ingest.options.IngestOptions` fields (default ``available_now``).

    Returns:
        ``seconds``, ``read``, ``batches``, ``rate`` (records read per second), ``progress`` and
        ``phases`` (per batch, see :func:`batch_phases`).
    """
    from icestream import start_ingest
    from icestream.lake import setup_tables

    setup_tables(spark, target)
    began = time.perf_counter()
    query = start_ingest(spark, target, **ingest_call_options(options))
    query.await_termination()
    seconds = time.perf_counter() - began
    progress = list(query.recent_progress)
    read = sum(batch["num_input_rows"] for batch in progress)
    return {
        "seconds": seconds,
        "read": read,
        "batches": len(progress),
        "rate": read / seconds,
        "progress": progress,
        "phases": batch_phases(spark, target, progress),
    }


PHASES = ("plan", "read", "parse", "dedupe", "write", "commit")


def _committed_at(spark: Any, table: str, snapshot_ids: list[int]) -> dict[int, float]:
    """When each of ``snapshot_ids`` was committed, in epoch seconds.

    The ids are picked here, not in SQL: Spark compiles a literal into its generated code, so a
    ``WHERE snapshot_id IN (...)`` made new classes after every measured ingest (4 per ingest,
    2026-11-28), which the JVM then compiled again while the next ingest was timed.
    """
    if not snapshot_ids:
        return {}
    wanted = set(snapshot_ids)
    rows = spark.sql(f"SELECT snapshot_id, unix_millis(committed_at) AS ms FROM {table}.snapshots").collect()
    return {row.snapshot_id: row.ms / 1000 for row in rows if row.snapshot_id in wanted}


def batch_phases(spark: Any, target: Any, progress: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Wall seconds of each batch by phase: plan, read, parse, dedupe, write, commit (and total).

    The ingest reports ``read`` (the read job's wall time, parsing included), ``parse`` (task time
    summed over shards), ``dedupe`` and ``write_rejects``/``write_events`` (each an Iceberg append,
    commit included). Two phases are split here:

    - *parse* is shown as its share of the read wall time: its task time divided by the tasks that
      run at once (``min(shards, cores)``); *read* is the rest (GetRecords, pacing, hand-over to the JVM);
    - *commit* is, per append, the time from the snapshot's own timestamp (Iceberg stamps a snapshot
      after writing its data files, manifests and manifest list) to the end of the append: writing
      ``vN.metadata.json``, the catalog's atomic swap, and the ingest finding its snapshot. *write* is the rest.
    """
    cores = os.cpu_count() or 1
    snapshot_times: dict[int, float] = {}
    for table, key in ((target.table_name, "events_snapshot_id"), (target.rejects_table_name, "rejects_snapshot_id")):
        snapshot_times |= _committed_at(spark, table, [batch[key] for batch in progress if batch.get(key)])
    phases = []
    for batch in progress:
        ms = batch["duration_ms"]
        seconds = {name: ms.get(name, 0.0) / 1000 for name in ("plan", "read", "parse", "dedupe")}
        tasks = max(1, min(len(batch["shards"]), cores))
        parse_wall = min(seconds["read"], seconds["parse"] / tasks)
        # The events append ends the batch (only bookkeeping follows), so count back from its end.
        clock = datetime.fromisoformat(batch["timestamp"]).timestamp() + ms.get("total", 0.0) / 1000
        write = commit = 0.0
        for kind in ("events", "rejects"):
            spent = ms.get(f"write_{kind}", 0.0) / 1000
            stamped = snapshot_times.get(batch.get(f"{kind}_snapshot_id") or -1)
            committing = min(spent, max(0.0, clock - stamped)) if stamped is not None else 0.0
            write += spent - committing
            commit += committing
            clock -= spent
        phases.append(
            {
                "plan": seconds["plan"],
                "read": seconds["read"] - parse_wall,
                "parse": parse_wall,
                "dedupe": seconds["dedupe"],
                "write": write,
                "commit": commit,
                "total": ms.get("total", 0.0) / 1000,
                "records": batch["num_input_rows"],
            }
        )
    return phases


def median_phases(phases: list[dict[str, float]]) -> dict[str, float]:
    """The median of each phase over batches."""
    if not phases:
        return {}
    return {key: statistics.median(batch[key] for batch in phases) for key in phases[0]}


def sum_phases(phases: list[dict[str, float]]) -> dict[str, float]:
    """Each phase summed over batches (the time a whole drain spent in it)."""
    if not phases:
        return {}
    return {key: sum(batch[key] for batch in phases) for key in phases[0]}


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def tree_cpu(root: int) -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of ``root`` and those descendants alive now that share its session,
    by pid, with what each process is: ``driver`` (``root``, the Python side), ``jvm`` or ``workers``
    (Spark's Python daemon and workers).

    The emulator and the background producer start in sessions of their own (they outlive the
    process that started them), so they are left out.
    """
    tree = _children()
    session = None
    found: dict[int, tuple[str, float]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        session = fields[3] if session is None else session  # the root's session id
        if fields[3] != session:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        kind = "driver" if pid == root else ("jvm" if name == "java" else "workers")
        found[pid] = (kind, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)  # utime, stime
        todo.extend(tree.get(pid, []))
    return found
