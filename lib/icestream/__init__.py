"""icestream: Kinesis -> PySpark -> Apache Iceberg, as a notebook workbook."""

__version__ = "0.1.0"
