"""Driver start-up: a new process's Spark session and its first catalog query, with and without the class archive.

Each run starts a fresh Python process that calls ``get_spark`` and then lists the tables of the
namespace (the first query loads the catalog, Iceberg and the JDBC driver), as a notebook kernel,
a CLI command or a scheduled job does first. Runs alternate between the default (the driver JVM maps
the class data sharing archive ``make setup`` built, :mod:`icestream.runtime.cds`) and
``ICESTREAM_CLASS_DATA_SHARING=false`` (the baseline), with the JVM's default JIT and, with
``--c1``, with C1 only as the tests run it. Reported: medians of the session start, the first
query and both together, and the ratio archive / baseline.

Run: ``.venv/bin/python bench/bench_startup.py`` (about 2 minutes), ``--runs 9`` for more.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, command_line, private_environment, shown, summary, write_results

CHILD = """
import json, time
began = time.perf_counter()
from icestream.config import load_settings
from icestream.runtime.spark import get_spark
settings = load_settings()
spark = get_spark(settings, app_name="icestream-bench-startup")
started = time.perf_counter()
spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.namespace_name}")
spark.sql(f"SHOW TABLES IN {settings.namespace_name}").collect()
queried = time.perf_counter()
print(json.dumps({"session": started - began, "first_query": queried - started, "total": queried - began}))
"""


def one_run(archive: bool, c1: bool) -> dict[str, float]:
    """One fresh process: seconds to its session, to its first catalog query, and both."""
    env = {**os.environ, "ICESTREAM_CLASS_DATA_SHARING": "true" if archive else "false"}
    if c1:
        env["SPARK_SUBMIT_OPTS"] = f"{env.get('SPARK_SUBMIT_OPTS', '')} -XX:TieredStopAtLevel=1".strip()
    result = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each kind (alternating)")
    parser.add_argument("--c1", action="store_true", help="C1-only JIT, as the tests' JVMs run")
    args = parser.parse_args()
    facts = banner("driver start-up with and without the class data sharing archive", command_line())
    private_environment("startup")
    from icestream.config import load_settings
    from icestream.runtime import cds

    settings = load_settings()
    extra, jars = cds.session_jars(settings)
    path, seconds = cds.build(settings.path("jar_cache_dir"), extra, jars=jars)
    built = f"built in {seconds:.0f} s" if seconds else "already built"
    print(f"archive: {path} ({built})", flush=True)
    one_run(True, args.c1)  # the first process after a build pays for reading the archive from disk
    runs: dict[str, list[dict[str, float]]] = {"archive": [], "baseline": []}
    for _ in range(args.runs):
        for kind in runs:
            runs[kind].append(one_run(kind == "archive", args.c1))
    results: dict[str, dict] = {}
    for kind, values in runs.items():
        results[kind] = {
            part: summary([value[part] for value in values]) for part in ("session", "first_query", "total")
        }
        print(f"{kind:8s} " + "; ".join(f"{part} {shown(stats, ' s')}" for part, stats in results[kind].items()))
    ratio = results["archive"]["total"]["median"] / results["baseline"]["total"]["median"]
    print(f"archive / baseline, session + first query (medians): {ratio:.2f}")
    write_results(
        "startup_c1" if args.c1 else "startup",
        {"machine": facts, "command": command_line(), "c1": args.c1, "ratio": round(ratio, 2), **results},
    )


if __name__ == "__main__":
    main()
