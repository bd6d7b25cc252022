"""Shared helpers for the benchmarks: machine facts, medians, results as JSON, a private emulator.

Every benchmark prints the command that reproduces it and the machine it ran on, measures a
baseline in the same run, and reports medians and ratios (these machines are noisy).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
SCRATCH = RESULTS / "tmp"  # gitignored: warehouses and emulator state of benchmark runs


def machine() -> dict[str, Any]:
    """Cores, memory and versions of what is measured."""
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
        "python": platform.python_version(),
        "java": java[0] if java else "unknown",
        "pyspark": importlib.metadata.version("pyspark"),
        "moto": importlib.metadata.version("moto"),
        "duckdb": importlib.metadata.version("duckdb"),
    }


def banner(name: str, command: str) -> dict[str, Any]:
    """Print what runs, how to reproduce it and on what; return the machine facts."""
    facts = machine()
    print(f"== {name}")
    print(f"reproduce: {command}")
    print("machine:  " + ", ".join(f"{key} {value}" for key, value in facts.items()))
    return facts


def summary(values: list[float]) -> dict[str, float]:
    """Median, min and max of repeated measurements."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


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


def private_environment(name: str) -> dict[str, str]:
    """Point icestream at a scratch warehouse and run folder for this benchmark (never data/)."""
    home = SCRATCH / name
    values = {
        "ICESTREAM_WAREHOUSE": str(home / "warehouse"),
        "ICESTREAM_RUN_DIR": str(home / "run"),
        "ICESTREAM_SPARK_LOG_LEVEL": "ERROR",
    }
    os.environ.update(values)
    return values


def command_line() -> str:
    """How this process was started, for the reproduce line."""
    return " ".join([".venv/bin/python", *[arg if " " not in arg else repr(arg) for arg in sys.argv]])
