"""Driver start-up: a new process's Spark session and its first catalog query, with and without the class archive.

Each run starts a fresh Python process that calls ``get_spark`` and then lists the tables of the
namespace (the first query loads the catalog, Iceberg and the JDBC driver), as a notebook kernel,
a CLI command or a scheduled job does first. Runs alternate between the default (the driver JVM maps
the class data sharing archive ``make setup`` built, :mod:`icestream.runtime.cds`) and
``ICESTREAM_CLASS_DATA_SHARING=false`` (the baseline), with the JVM's default JIT and, with
``--c1``, with C1 only as the tests run it (``icestream.runtime.java_options.C1_ONLY``).
``--without bytecode`` takes the compiled Python bytecode ``make`` writes at install away from the
baseline instead (``PYTHONPYCACHEPREFIX`` pointed at an empty
folder: Python compiles every module it imports from source, as it did before, where
``PYTHONDONTWRITEBYTECODE`` is set). Reported: medians of the imports, the session start, the first
query and all together, and the ratio default / baseline.

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

from common import SCRATCH, banner, command_line, private_environment, shown, summary, write_results

from icestream.runtime.java_options import C1_ONLY

CHILD = """
import json, time
began = time.perf_counter()
from icestream.config import load_settings
from icestream.runtime.spark import get_spark
imported = time.perf_counter()
settings = load_settings()
spark = get_spark(settings, app_name="icestream-bench-startup")
started = time.perf_counter()
spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.namespace_name}")
spark.sql(f"SHOW TABLES IN {settings.namespace_name}").collect()
queried = time.perf_counter()
print(json.dumps({"imports": imported - began, "session": started - imported, "first_query": queried - started,
                  "total": queried - began}))
"""
PARTS = ("imports", "session", "first_query", "total")


def one_run(archive: bool, c1: bool, bytecode: bool = True) -> dict[str, float]:
    """One fresh process: seconds to its imports, its session, its first catalog query, and all together."""
    env = {**os.environ, "ICESTREAM_CLASS_DATA_SHARING": "true" if archive else "false"}
    if not bytecode:  # a folder with no bytecode in it, which Python reads instead of __pycache__
        env["PYTHONPYCACHEPREFIX"] = str(SCRATCH / "no-bytecode")
    if c1:
        env["SPARK_SUBMIT_OPTS"] = f"{env.get('SPARK_SUBMIT_OPTS', '')} {C1_ONLY}".strip()
    result = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each kind (alternating)")
    parser.add_argument("--c1", action="store_true", help="C1-only JIT, as the tests' JVMs run")
    parser.add_argument("--without", choices=("archive", "bytecode"), default="archive",
                        help="what the baseline runs without")  # fmt: skip
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
    default = "archive" if args.without == "archive" else "bytecode"
    runs: dict[str, list[dict[str, float]]] = {default: [], "baseline": []}
    for _ in range(args.runs):
        for kind in runs:
            without = args.without if kind == "baseline" else None  # what this run goes without
            runs[kind].append(one_run(without != "archive", args.c1, without != "bytecode"))
    results: dict[str, dict] = {}
    for kind, values in runs.items():
        results[kind] = {part: summary([value[part] for value in values]) for part in PARTS}
        print(f"{kind:8s} " + "; ".join(f"{part} {shown(stats, ' s')}" for part, stats in results[kind].items()))
    ratio = results[default]["total"]["median"] / results["baseline"]["total"]["median"]
    print(f"{default} / baseline, imports + session + first query (medians): {ratio:.2f}")
    name = "startup" + ("_c1" if args.c1 else "") + ("_bytecode" if default == "bytecode" else "")
    write_results(
        name, {"machine": facts, "command": command_line(), "c1": args.c1, "ratio": round(ratio, 2), **results}
    )


if __name__ == "__main__":
    main()
