"""What Python holds of a running session: the driver JVM's py4j view, and the one row a query answers.

pyspark types both as optional (``SparkContext._jvm`` is None before a context starts or under Spark
Connect; ``DataFrame.first()`` is None for no rows). Callers here hold a started classic session and
ask for rows that exist (an aggregate, a table's own DDL), so these say so once, with an error that
names what was missing instead of an ``AttributeError`` on None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icestream.errors import IngestError, SparkStartError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

__all__ = ["first_row", "jvm"]


def jvm(spark: SparkSession) -> Any:
    """The py4j view of the session's driver JVM (``spark.sparkContext._jvm``).

    Raises:
        SparkStartError: If the session has no JVM (Spark Connect, or a stopped context).
    """
    view = spark.sparkContext._jvm
    if view is None:
        raise SparkStartError("this Spark session has no driver JVM (Spark Connect?): use a classic session")
    return view


def first_row(frame: DataFrame) -> Row:
    """The first row of ``frame``, for queries that always answer one (``count(*)``, ``max``, DDL).

    Raises:
        IngestError: If the query answered no row at all.
    """
    row = frame.first()
    if row is None:
        raise IngestError("a query that always answers one row answered none")
    return row


def heap_mib(spark: SparkSession) -> dict[str, float]:
    """The driver JVM's heap now, in MiB: ``used``, ``committed`` (what the JVM holds of the machine)
    and ``max`` (``spark.driver.memory``)."""
    runtime = jvm(spark).java.lang.Runtime.getRuntime()
    total, free, most = runtime.totalMemory(), runtime.freeMemory(), runtime.maxMemory()
    return {
        "used": round((total - free) / 2**20, 1),
        "committed": round(total / 2**20, 1),
        "max": round(most / 2**20, 1),
    }
