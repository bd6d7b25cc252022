"""Arrow in and out of Spark on the driver without pandas.

pyspark 3.5's ``DataFrame.mapInArrow`` builds its function through ``pandas_udf``, whose first act
is pandas' version check: the driver imports pandas (and distutils, for pyspark's
``LooseVersion``) only to start a job whose Python runs in the workers. In a drain's process that
was 0.57 of its 1.2 CPU-seconds of Python (py-spy, 2026-11-27). The ingest never
needs pandas on the driver: :func:`map_in_arrow` makes the same plan from the same pieces
(a ``SQL_MAP_ARROW_ITER_UDF`` user-defined function over every column, then the Dataset's
``pythonMapInArrow``), and :func:`collect_arrow` collects a frame as Arrow, as ``toPandas``
does before it converts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


def map_in_arrow(
    frame: DataFrame, func: Callable[[Iterator[Any]], Iterator[Any]], schema: StructType | str
) -> DataFrame:
    """``frame.mapInArrow(func, schema)`` (not in barrier mode), without importing pandas here.

    Args:
        frame: The input rows.
        func: Arrow record batches in, Arrow record batches out (runs in the workers).
        schema: The output rows' schema (or its DDL text).
    """
    from pyspark.sql import DataFrame
    from pyspark.sql.udf import UserDefinedFunction

    try:
        from pyspark.util import PythonEvalType
    except ImportError:  # pyspark 3.5 keeps it in pyspark.rdd
        from pyspark.rdd import PythonEvalType  # type: ignore[import-not-found,no-redef]

    function = UserDefinedFunction(func, returnType=schema, evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
    java_column: Any = function(*[frame[name] for name in frame.columns])._jc
    if _spark_major() >= 4:
        # Spark 4's Column holds no Catalyst expression (no .expr()): the Dataset takes the Column itself,
        # with the barrier flag and a resource profile (None), as pyspark 4's own mapInArrow passes them.
        return DataFrame(frame._jdf.mapInArrow(java_column, False, None), frame.sparkSession)
    return DataFrame(frame._jdf.pythonMapInArrow(java_column.expr(), False), frame.sparkSession)


def _spark_major() -> int:
    import pyspark

    return int(pyspark.__version__.split(".")[0])


def collect_arrow(frame: DataFrame) -> Any:
    """Every row of ``frame`` as one ``pyarrow.Table`` in the frame's order (``toPandas``' own
    collection, without its conversion to pandas)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    # pyspark 4 declares the method on the classic DataFrame only, not on the DataFrame type hints name.
    classic: Any = frame
    batches = classic._collect_as_arrow()
    return pa.Table.from_batches(batches, schema=to_arrow_schema(frame.schema))
