"""The work whose classes go into the driver's class data sharing archive (see :mod:`icestream.runtime.cds`).

Run by ``cds.build`` in a child process with a scratch warehouse: one session does what the
workbook's sessions do first (catalog, DDL, an append with snapshot properties, reads, metadata
tables, a Python ``mapInArrow`` job, a local checkpoint), then the JVM is ended through its
standard input, as PySpark's own shutdown does, and writes the classes it loaded on its way out.
"""

from __future__ import annotations


def main() -> None:
    """Run the work, then wait for the JVM to exit (the archive is written as it exits)."""
    from pyspark import SparkContext

    from icestream.config import load_settings
    from icestream.runtime.spark import get_spark

    settings = load_settings()
    spark = get_spark(settings, app_name="icestream-cds")
    namespace = f"{settings.catalog}.{settings.namespace}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    table = f"{namespace}.cds_workload"
    rows = spark.range(20).selectExpr("id", "cast(id AS string) AS name")
    rows.mapInArrow(lambda batches: batches, rows.schema).localCheckpoint().count()
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table} (id BIGINT, name STRING) USING iceberg PARTITIONED BY (name)")
    rows.writeTo(table).option("snapshot-property.icestream.cds", "1").append()
    spark.table(table).where("id > 3").groupBy("name").count().toPandas()
    spark.sql(f"SELECT * FROM {table}.snapshots").collect()
    spark.sql(f"SELECT * FROM {table}.files").collect()
    gateway = SparkContext._gateway
    spark.stop()
    process = getattr(gateway, "proc", None)
    if process is not None:  # the JVM exits when its standard input closes
        process.stdin.close()
        process.wait(timeout=120)


if __name__ == "__main__":
    main()
