"""The same drain by two checkouts of icestream, alternated on one emulator and one stream: did a
commit make the ingest slower?

A ratio against the bare GetRecords loop moves with the loop as much as with the ingest (the loop's
rate here ranged from 7,000 to 18,000 records/s between days), so a regression hunt compares the
ingest with itself. Each checkout (a clone at some commit, set up with ``make setup``) drains the
same stream in processes of its own: a session, one warm-up drain, then ``--drains`` timed drains
into fresh tables, through that checkout's ``bench/common.run_ingest``. The checkouts alternate
round by round (ABBA), and the bare loop runs before each for reference.

Run: ``git clone -q . /tmp/old && (cd /tmp/old && git checkout -q COMMIT && make setup)``, then
``.venv/bin/python bench/bench_checkouts.py /tmp/old .`` (about 5 minutes with the defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, command_line, fill_stream, private_environment, raw_drain, timed, write_results

# Run by each checkout's own Python, in its own folder: its bench/common and its icestream.
CHILD = """
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
from common import new_table_settings, run_ingest
from icestream.config import load_settings
from icestream.runtime.spark import get_spark
stream, drains = sys.argv[1], int(sys.argv[2])
spark = get_spark(load_settings(stream_name=stream), app_name="icestream-bench-checkouts")
done = []
for _ in range(drains + 1):
    result = run_ingest(spark, new_table_settings(stream), dedupe=True)
    done.append({"seconds": result["seconds"], "read": result["read"], "batches": result["batches"],
                 "phases": [batch.get("duration_ms", {}) for batch in result["progress"]]})
print("RESULT " + json.dumps(done[1:]))
"""


def drains_by(checkout: Path, stream: str, drains: int) -> list[dict[str, Any]]:
    """``drains`` timed drains of ``stream`` by ``checkout``'s code (after a warm-up), in a new process."""
    python = checkout / ".venv" / "bin" / "python"
    done = subprocess.run([str(python), "-c", CHILD, stream, str(drains)], cwd=checkout, capture_output=True,
                          text=True, env=dict(os.environ), check=False)  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise SystemExit(f"{checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[0].removeprefix("RESULT "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs=2, type=Path, help="two set-up clones (the first is the baseline)")
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--drains", type=int, default=3, help="timed drains per process")
    args = parser.parse_args()
    result = banner("one drain, two checkouts, alternated", command_line())
    private_environment("checkouts")
    os.environ["ICESTREAM_EMULATOR_WRITE_LIMITS"] = "false"
    from icestream.config import load_settings
    from icestream.kinesis.emulator import Emulator

    settings = load_settings(stream_name=f"checkouts-{uuid.uuid4().hex[:6]}", shard_count=args.shards)
    emulator = Emulator(settings.path("run_dir"))
    emulator.start(write_limits=False)
    try:
        sent = fill_stream(settings, args.records, args.shards)
        names = [str(checkout.resolve()) for checkout in args.checkouts]
        seconds: dict[str, list[float]] = {name: [] for name in names}
        ceiling: list[float] = []
        for number in range(args.rounds):
            for name in names if number % 2 == 0 else reversed(names):
                loop_seconds, count = timed(lambda: raw_drain(settings))
                ceiling.append(count / loop_seconds)
                drains = drains_by(Path(name), settings.stream_name, args.drains)
                if any(drain["read"] != sent for drain in drains):
                    raise SystemExit(f"{name} read {[drain['read'] for drain in drains]}, the stream holds {sent}")
                seconds[name] += [drain["seconds"] for drain in drains]
                print(f"round {number + 1} {name}: " + ", ".join(f"{drain['seconds']:.2f} s" for drain in drains)
                      + f"; bare loop {ceiling[-1]:,.0f} rec/s", flush=True)  # fmt: skip
    finally:
        emulator.stop()
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    baseline, other = names
    result.update({"records": sent, "seconds": seconds, "median_seconds": medians,
                   "bare_loop_records_per_s": statistics.median(ceiling),
                   "ratio_rate_second_to_first": medians[baseline] / medians[other]})  # fmt: skip
    for name in names:
        print(f"{name}: median drain {medians[name]:.3f} s, {sent / medians[name]:,.0f} records/s")
    print(f"records/s, second / first: {medians[baseline] / medians[other]:.3f} "
          f"(bare loop {statistics.median(ceiling):,.0f} rec/s)")  # fmt: skip
    print(f"results:  {write_results('checkouts', result)}")


if __name__ == "__main__":
    main()
