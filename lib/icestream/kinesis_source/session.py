"""``icestream.get_spark()``: the session, with ``format("kinesis")`` registered on Spark lines with Python sources."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icestream.runtime import spark as runtime_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icestream.config import Settings


def has_python_sources() -> bool:
    """Spark 4 and later have the Python data source API (``pyspark.sql.datasource``); Spark 3.5 has not."""
    import pyspark

    return int(pyspark.__version__.split(".")[0]) >= 4


def get_spark(settings: Settings | None = None, app_name: str = "icestream", drain: bool = False) -> SparkSession:
    """:func:`icestream.runtime.spark.get_spark`, then the ``kinesis`` source registered (on Spark 4).

    Args:
        settings: The active settings (default: ``load_settings()``).
        app_name: The application name shown in the Spark UI and logs.
        drain: The process drains a stream and ends: a new driver JVM starts with C1 only.
    """
    spark = runtime_spark.get_spark(settings, app_name, drain)
    if has_python_sources():
        from icestream.kinesis_source.data_source import register

        register(spark)
    return spark
