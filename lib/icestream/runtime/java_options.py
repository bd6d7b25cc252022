"""The driver JVM's options: properties appended to what a cluster sets, and the JIT and GC of a drain.

A drain (``icestream ingest --available-now``, a scheduled run) lives for seconds to minutes. The
JVM's second compiler (C2) spends a quarter of such a process's CPU compiling code that runs for too
short a time to repay it: measured 2026-11-27 (docs/performance.md, backlog drains), 200,000
records drained on 4 and 128 shards cost 0.75 of the CPU with C1 only (``-XX:TieredStopAtLevel=1``),
1.33x the records per CPU-second, and finished sooner; at 100,000 and 300,000 records 0.75 and
0.79. A query that runs for hours keeps the JVM's default, whose C2 code is the faster once compiled.
The tests' drivers run with C1 only for the same reason (tests/conftest.py).

A drain's JVM also collects with the serial collector (``-XX:+UseSerialGC``) rather than G1, whose
concurrent threads and write barriers cost a short process up to a CPU-second: measured 2026-11-27
(docs/performance.md, backlog drains), drains of 200,000 and 600,000 records cost 1.1 and 0.6
CPU-seconds less (1.08x and 1.02x the records per CPU-second), the JVM's peak 0.7 GiB against 0.85
at 200,000. Its pauses stop the batch, not a reader waiting on fresh data: a query that runs for
hours keeps G1.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from icestream.runtime.cds import JAVA_OPTION_VARIABLES  # the variables a JVM reads its options from

# C1 alone would also get the code cache of a JVM without tiers, 48 MB instead of 240: a long-lived session
# that compiles Spark's generated classes filled it in 8 minutes of tests (2026-11-27), then failed a DROP
# TABLE with "InternalError: Out of space in CodeCache for method handle intrinsic". It keeps the 240 MB.
C1 = "-XX:TieredStopAtLevel=1"
C1_ONLY = f"{C1} -XX:ReservedCodeCacheSize=240m"
# Options by which a user or a cluster already chose the JIT: theirs stands.
JIT_CHOICES = ("TieredStopAtLevel", "TieredCompilation", "CompilationMode", "-Xint", "-Xcomp")

SERIAL_GC = "-XX:+UseSerialGC"
# Options by which a user or a cluster already chose the collector: theirs stands.
GC_CHOICES = (
    "UseSerialGC",
    "UseParallelGC",
    "UseG1GC",
    "UseZGC",
    "UseShenandoahGC",
    "UseEpsilonGC",
    "UseConcMarkSweepGC",
)


def append_java_options(existing: str, options: dict[str, str]) -> str:
    """Append ``-Dname=value`` options to a JVM options string, keeping what is there.

    A property the string already sets keeps its value (the user's or cluster's choice), except
    ``java.library.path``, which is extended: a second ``-Djava.library.path`` would replace the first.

    Args:
        existing: Options already set (``spark-defaults.conf``), possibly empty.
        options: Properties this project needs.

    Returns:
        The combined options string.
    """
    combined = existing.strip()
    for name, value in options.items():
        present = re.search(rf"(?:^|\s)-D{re.escape(name)}=(\S*)", combined)
        if present is None:
            combined = f"{combined} -D{name}={value}".strip()
        elif name == "java.library.path" and value not in present.group(1).split(os.pathsep):
            combined = combined[: present.end(1)] + os.pathsep + value + combined[present.end(1) :]
    return combined


def drain_options(driver_options: str, others: Iterable[str] = ()) -> str:
    """``driver_options`` with C1 only and the serial collector appended, each unless they, ``others``
    (the cluster's) or the JVM's variables already choose a JIT or a collector.

    Args:
        driver_options: ``spark.driver.extraJavaOptions`` as prepared.
        others: More option strings that reach the same JVM.

    Returns:
        The driver's options for a drain.
    """
    texts = [driver_options, *others]
    return " ".join([driver_options, *_not_chosen(texts, ((C1_ONLY, JIT_CHOICES), (SERIAL_GC, GC_CHOICES)))]).strip()


def _not_chosen(texts: Iterable[str], offered: Iterable[tuple[str, tuple[str, ...]]]) -> list[str]:
    """The options of ``offered`` (each with the options that would mean the same choice was made)
    that neither ``texts`` nor the JVM's variables already choose."""
    texts = [*texts, *(os.environ.get(name, "") for name in JAVA_OPTION_VARIABLES)]
    return [options for options, choices in offered if not any(choice in text for text in texts for choice in choices)]


# Spark's launcher (``bin/spark-class`` runs ``org.apache.spark.launcher.Main`` to build the driver's
# command line before the driver starts) is a JVM that lives a fraction of a second: with C1 only and
# the serial collector it took 0.15-0.16 CPU-seconds instead of 0.24-0.27 (/usr/bin/time, 3 runs
# each, 2026-11-27). Its options come from this variable (spark-class's ``SPARK_LAUNCHER_OPTS``).
LAUNCHER_VARIABLE = "SPARK_LAUNCHER_OPTS"


def launcher_environ() -> dict[str, str]:
    """``SPARK_LAUNCHER_OPTS`` for the launcher JVM: C1 only and the serial collector, each unless
    the variable is set already or the JVM's variables choose a JIT or a collector (theirs stands)."""
    if os.environ.get(LAUNCHER_VARIABLE) is not None:
        return {}
    # C1 without the larger code cache: the launcher ends long before it could fill one.
    added = _not_chosen([], ((C1, JIT_CHOICES), (SERIAL_GC, GC_CHOICES)))
    return {LAUNCHER_VARIABLE: " ".join(added)} if added else {}
