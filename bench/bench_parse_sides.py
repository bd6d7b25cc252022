"""Where a record's JSON is cheaper to parse: in the read task (Python) or in the JVM (``from_json``).

The ingest parses each payload in its read task (``parse_event``: msgspec, checks, the event time)
and hands the JVM typed Arrow columns (``record_batch``). The alternative would hand the JVM the
payload's bytes and parse them there with ``from_json`` and ``to_timestamp``. Both sides are
measured over the same generated payloads, each against the part it would keep anyway:

- **JVM**: payload lines kept in memory, then (a) their length only and (b) ``from_json`` with the
  explicit wire schema and ``to_timestamp`` of the event time, both into Spark's ``noop`` sink;
  the JVM's core-seconds (psutil; local mode: the executors are the JVM).
- **Read task**: in this process, with the collector off as in a read task, chunks of 10,000
  payloads turned into (a) one Arrow column of their bytes, what the JVM parse would need, and (b)
  ``parse_event`` of each and ``record_batch`` of the rows the reader yields; this process's CPU.

Reported per record, for each side: (b) − (a), what parsing costs it, medians of alternating rounds
after warm-up rounds (the JIT compiles ``from_json``'s code slowly). The Python side leaves out
what the read task pays either way (GetRecords, the dedupe digests, the hand-over to the JVM).

Run: ``.venv/bin/python bench/bench_parse_sides.py`` (about 2 minutes; ``--help`` for sizes).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import SCRATCH, banner, bench_session, command_line, line_records, summary, write_results

CHUNK = 10_000  # rows per Arrow record batch, as the read task's (reader.ARROW_CHUNK_ROWS)


def jvm_sides(spark: Any, payloads: Path) -> dict[str, Any]:
    """The two JVM actions over the kept payload lines."""
    from pyspark.sql import functions as F  # noqa: N812

    from icestream.lake.schema import wire_schema

    lines = spark.read.text(str(payloads)).localCheckpoint(eager=True)

    def run(frame: Any) -> None:  # every row computed, nothing written
        frame.write.format("noop").mode("overwrite").save()

    def lengths() -> None:
        run(lines.select(F.length("value").alias("n")))

    def parsed() -> None:
        events = lines.select(F.from_json("value", wire_schema()).alias("e"))
        run(events.select("e.*", F.to_timestamp("e.event_ts").alias("event_time")))

    return {"lengths": lengths, "parsed": parsed}


def python_sides(datas: list[bytes]) -> dict[str, Any]:
    """The two read-task actions over the same payloads, in chunks."""
    import pyarrow as pa

    from icestream.ingest.parse import Rejection, parse_event
    from icestream.ingest.reading.record_rows import arrow_schema, record_batch

    schema = arrow_schema()
    arrival = datetime.now(UTC)
    position = ("shardId-000000000000", "4965" + "0" * 52, "key", arrival)
    chunks = [datas[start : start + CHUNK] for start in range(0, len(datas), CHUNK)]

    def raw() -> None:
        for chunk in chunks:
            pa.RecordBatch.from_arrays([pa.array(chunk, type=pa.binary())], names=["raw_data"])

    def parsed() -> None:
        for chunk in chunks:
            rows = []
            for ordinal, data in enumerate(chunk):
                fields = parse_event(data)
                if isinstance(fields, Rejection):
                    continue
                rows.append(("event", *position, *fields[:8], None, None, None, None, ordinal, None))
            record_batch(rows, schema, 1, arrival)

    return {"raw": raw, "parsed": parsed}


def process_seconds(action: Any) -> float:
    before = time.process_time()
    action()
    return time.process_time() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=8, help="measured rounds of each action")
    parser.add_argument("--warmup", type=int, default=6, help="unmeasured rounds first")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    import psutil

    facts = banner("parsing a record's JSON in the read task or in the JVM", command_line())
    records = line_records(args.records, args.seed)
    datas = [record.data for record in records]
    with bench_session("parse_sides") as (_settings, spark):
        payloads = SCRATCH / "parse_sides" / "payloads.jsonl"  # the session starts with a fresh scratch folder
        payloads.parent.mkdir(parents=True, exist_ok=True)
        payloads.write_bytes(b"".join(data + b"\n" for data in datas))
        jvm = psutil.Process(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))

        def jvm_seconds(action: Any) -> float:
            before = sum(jvm.cpu_times()[:2])
            action()
            return sum(jvm.cpu_times()[:2]) - before

        actions = {f"jvm {name}": (jvm_seconds, action) for name, action in jvm_sides(spark, payloads).items()}
        actions |= {f"python {name}": (process_seconds, action) for name, action in python_sides(datas).items()}
        seconds: dict[str, list[float]] = {name: [] for name in actions}
        collecting = gc.isenabled()
        gc.disable()  # as in a read task (read_task.read_arrow)
        try:
            for number in range(args.warmup + args.rounds):
                names = list(actions) if number % 2 == 0 else list(reversed(actions))
                for name in names:
                    meter, action = actions[name]
                    used = meter(action)
                    if number >= args.warmup:
                        seconds[name].append(used)
        finally:
            if collecting:
                gc.enable()
    per_record = {name: summary([value / len(datas) * 1e6 for value in values]) for name, values in seconds.items()}
    jvm_parse = per_record["jvm parsed"]["median"] - per_record["jvm lengths"]["median"]
    python_parse = per_record["python parsed"]["median"] - per_record["python raw"]["median"]
    for name, stats in per_record.items():
        print(f"{name:16s} {stats['median']:6.2f} µs per record (min {stats['min']:.2f}, max {stats['max']:.2f})")
    print(f"parsing in the JVM (from_json + to_timestamp): {jvm_parse:.2f} µs per record")
    print(f"parsing in the read task (parse_event + record_batch): {python_parse:.2f} µs per record")
    print(f"JVM / read task: {jvm_parse / python_parse:.2f}")
    write_results("parse_sides", {
        "machine": facts, "command": command_line(), "records": len(datas), "rounds": args.rounds,
        "warmup": args.warmup, "microseconds_per_record": per_record,
        "jvm_parse_microseconds": jvm_parse, "read_task_parse_microseconds": python_parse,
        "ratio_jvm_to_read_task": jvm_parse / python_parse,
    })  # fmt: skip


if __name__ == "__main__":
    main()
