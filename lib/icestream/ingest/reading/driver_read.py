"""A batch at the stream's tip, read on the driver: the batch's append is its only Spark job.

At the tip a batch holds what arrived during one trigger: at 100 events/s and a 1 s trigger, about
a hundred records over a few shards. Read by Spark, such a batch cost a job of its own before the
append's (its tasks serialized and scheduled, Python workers woken, the rows kept in the block
store, the meta rows collected): about half of a batch's driver time at the tip
(docs/performance.md, "Batch cost at the tip"). Spark's own micro-batch sources run one job per
batch, the write.

Here the same reader (:func:`~icestream.ingest.reading.shard_reader.read_shard`: the same GetRecords calls, rows
and meta row per shard) runs in the driver's Python process, one thread per shard, and the rows
reach the JVM as one Arrow record batch, which Spark parallelizes without a job. They are in memory
before the DataFrame exists, so every stage that reads them sees exactly the records the meta rows
describe, as with the kept rows of a Spark read.

Only one GetRecords answer per shard is read here (:data:`TIP_RECORDS_PER_SHARD`): a shard that
fills it caps the batch, and a capped batch means a backlog, which the next batch reads with Spark,
in parallel tasks (``ShardSource``).
"""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from icestream.ingest.reading.record_rows import ROW_FIELDS, arrow_schema, record_batch, row_schema
from icestream.ingest.reading.shard_plan import ShardPlan
from icestream.ingest.reading.shard_reader import ReadOptions, read_shard
from icestream.limits import MAX_RECORDS_PER_GET
from icestream.runtime.handles import jvm as jvm_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TIP_RECORDS_PER_SHARD = MAX_RECORDS_PER_GET  # one GetRecords answer
_KIND, _META, _RAW = (ROW_FIELDS.index(name) for name in ("kind", "meta", "raw_data"))


def arrow_frame(spark: SparkSession, batches: Sequence[Any], schema: Any) -> DataFrame:
    """A DataFrame of Arrow record batches (one partition each), made without running a Spark job.

    pyspark 3.5's ``createDataFrame`` takes pandas, not Arrow: going through pandas would convert
    every column twice. This is the path it takes after that conversion: the batches written as one
    Arrow stream, parallelized by the JVM, read back as rows by the tasks that use them.

    Args:
        spark: The session.
        batches: ``pyarrow.RecordBatch`` es whose schema is ``schema``'s Arrow form.
        schema: The Spark schema of the rows.
    """
    from pyspark.sql import DataFrame
    from pyspark.sql.pandas.serializers import ArrowStreamSerializer

    jvm = jvm_of(spark)
    utils = _sql_utils(jvm)
    rdd = spark.sparkContext._serialize_to_jvm(
        list(batches),
        ArrowStreamSerializer(),
        lambda path: utils.readArrowStreamFromFile(path),
        lambda: jvm.ArrowIteratorServer(),  # only with spark.io.encryption.enabled
    )
    return DataFrame(utils.toDataFrame(rdd, schema.json(), spark._jsparkSession), spark)


@functools.cache
def _sql_utils(jvm: Any) -> Any:
    """Spark's ``PythonSQLUtils`` class, looked up once per JVM: py4j finds a short name by trying each
    imported package in turn, and every package before the right one is a failed class lookup."""
    return jvm.org.apache.spark.sql.api.python.PythonSQLUtils


def _shard_rows(plan: ShardPlan, options: ReadOptions) -> list[tuple]:
    return list(read_shard(plan, options))


def read_on_driver(
    spark: SparkSession, options: ReadOptions, plans: Sequence[ShardPlan], pool: ThreadPoolExecutor
) -> tuple[DataFrame, list[tuple[str, bytes]]]:
    """Read ``plans`` in this process and hand the rows to Spark.

    Args:
        spark: The session.
        options: As a read task gets them (``max_records`` is the per-shard cap).
        plans: One per shard.
        pool: Threads for the shards' calls (they wait on the network, not the CPU).

    Returns:
        The event, reject and raw rows as a DataFrame of :func:`~icestream.ingest.reading.shard_reader.row_schema`,
        and per plan, in order, its meta row's ``(meta, raw_data)``: the task's stats and digests.

    Raises:
        ShardReadError: As a read task would, once every shard's read has ended.
    """
    futures = [pool.submit(_shard_rows, plan, options) for plan in plans]
    concurrent.futures.wait(futures)  # no shard is left reading when another one failed
    rows: list[tuple] = []
    metas: list[tuple[str, bytes]] = []
    for future in futures:
        for row in future.result():
            if row[_KIND] == "meta":
                metas.append((row[_META], row[_RAW] or b""))
            else:
                rows.append(row)
    batch = record_batch(rows, arrow_schema(), options.batch_id, options.ingest_ts)
    return arrow_frame(spark, [batch], row_schema()), metas
