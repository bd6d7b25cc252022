"""Notebook 02's reference job: its table and checkpoint, both anew on every run.

The lesson types the reference design's job itself (``spark.readStream.format("kinesis")`` →
``from_json`` → ``writeStream.format("iceberg")``) and its ``CREATE TABLE``, marked with the
lesson's name (:data:`~icestream.lake.demo_tables.DEMO_PROPERTY`). :func:`reference_job_lesson` gives
it a clean start: it drops the table ``<table>_reference_demo`` if the lesson made it (any other
table of that name stops it, untouched) and removes the query's checkpoint folder, so a second
run of the notebook reads the same first batch as the first did.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from icestream.config import REFERENCE_DEMO_SUFFIX
from icestream.lake.demo_tables import drop_demo_tables
from icestream.lake.statement import statements_hidden

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icestream.config import Settings


def reference_job_lesson(spark: SparkSession, settings: Settings) -> tuple[str, Path]:
    """Drop the lesson's table and remove its checkpoint; return the table's name and the checkpoint's folder.

    Raises:
        TableOwnershipError: If ``<table>_reference_demo`` exists and the lesson did not make it.
    """
    table = settings.companion_table_name(REFERENCE_DEMO_SUFFIX)
    with statements_hidden():  # the lesson's own table, dropped to be made again: plumbing
        drop_demo_tables(spark, [table], REFERENCE_DEMO_SUFFIX)
    folder = settings.path("run_dir") / REFERENCE_DEMO_SUFFIX
    shutil.rmtree(folder, ignore_errors=True)
    return table, folder / "checkpoint"
