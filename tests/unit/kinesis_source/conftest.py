"""The kinesis source's tests: those of the modules that need Spark 4's Python data source API are left
out on a Spark line without it (3.5: ``make test-spark3.5``), where the source does not exist."""

import importlib.util

HAS_PYTHON_SOURCES = importlib.util.find_spec("pyspark.sql.datasource") is not None
SPARK_4_ONLY = ["test_crash_drill.py", "test_data_source.py", "test_progress.py", "test_stream_reader.py"]
collect_ignore = [] if HAS_PYTHON_SOURCES else SPARK_4_ONLY
