"""What the installed Spark line offers that the other does not (``make test-spark3.5`` runs the unit tests on 3.5)."""

from __future__ import annotations

import importlib
import importlib.util

# Spark 4's Python data source API, which the kinesis source is written on; Spark 3.5 has none.
HAS_PYTHON_SOURCES = importlib.util.find_spec("pyspark.sql.datasource") is not None


def importable(module: str) -> bool:
    """Whether ``module`` imports on this Spark line: False only for a Spark 4 module on Spark 3.5."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name == "pyspark.sql.datasource" and not HAS_PYTHON_SOURCES:
            return False
        raise
    return True
