"""Notebook 09's two set-ups: an orphan file planted in a table, and one hour copied to be sorted.

Both make something for the lesson to repair or measure: ``plant_orphan_file`` leaves what a crashed
writer leaves (for ``remove_orphan_files``), ``copy_hour_for_sorting`` a busy hour cut into several
files (for a sort rewrite, measured with :mod:`icestream.queries.file_skipping`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from icestream.errors import ConfigError
from icestream.lake.statement import Statement
from icestream.lake.table import LakeTable
from icestream.queries.health import TARGET_FILE_SIZE_PROPERTY
from icestream.validation import validate_identifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icestream.config import Settings


def plant_orphan_file(table: LakeTable, age: timedelta, name: str = "orphan-planted-by-09.parquet") -> str:
    """Copy one of the table's data files into its data folder, unreferenced and ``age`` old: an orphan.

    This is what a writer that crashed between writing a file and committing it leaves behind, and
    what ``remove_orphan_files`` exists for. The copy's modification time is set ``age`` back, so
    the procedure's ``older_than`` (which Iceberg refuses under 24 hours, to spare a running
    writer's uncommitted files) reaches it without waiting a day.

    Args:
        table: The table (its warehouse must be a local folder: only there can a file's time be set).
        age: How old the file is made to look.
        name: The file's name in ``<table location>/data``.

    Returns:
        The file's local path.

    Raises:
        ConfigError: If the table is not in a local folder, has no data file, or ``name`` is not a plain file name.
    """
    import os
    import shutil
    from datetime import UTC
    from pathlib import Path
    from urllib.parse import urlparse

    from icestream.lake.inspect import load_iceberg_table

    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"orphan file name {name!r}: give a plain file name such as orphan.parquet.")
    location = urlparse(str(load_iceberg_table(table.spark, table.name).location()))
    if location.scheme not in ("", "file"):
        raise ConfigError(f"{table.name} is in {location.scheme}://: planting an orphan needs a local warehouse.")
    files = table.inspect.data_files()
    if files.empty:
        raise ConfigError(f"{table.name} has no data file to copy: ingest some events first (notebook 02).")
    orphan = Path(location.path) / "data" / name
    shutil.copyfile(urlparse(files["file_path"].iloc[-1]).path, orphan)
    moment = (datetime.now(UTC) - age).timestamp()
    os.utime(orphan, (moment, moment))
    return str(orphan)


def copy_hour_for_sorting(
    spark: SparkSession,
    settings: Settings,
    source: LakeTable,
    hour_start: datetime,
    target_file_bytes: int,
    echo: bool | None = None,
) -> LakeTable:
    """Copy one hour of the events table into ``<table>_sort_demo``, written in files of a given size.

    A demo hour is far below the 128 MiB target, so it fits one file and no sort could narrow a
    file's bounds; a busy hour on a real table spans many files. The copy's
    ``write.target-file-size-bytes`` cuts the hour into several files, as size would. Every statement
    (the ``DROP``, ``CREATE``, ``ALTER`` and ``INSERT``) is recorded on the copy's ``statements``.

    Args:
        spark: The session.
        settings: Names the copy (``companion_table_name`` with :data:`~icestream.config.SORT_DEMO_SUFFIX`).
        source: The events table.
        hour_start: The hour to copy (aware).
        target_file_bytes: The copy's target file size.
        echo: Whether the copy prints its statements (None: as ``show_statements`` says); notebook 09
            keeps the set-up of the copy quiet, its lesson is the sort rewrite.

    Returns:
        The copy.

    Raises:
        ConfigError: If ``target_file_bytes`` is not a positive integer or ``hour_start`` is naive.
    """
    from icestream.config import SORT_DEMO_SUFFIX
    from icestream.lake.ddl import create_events_table

    if isinstance(target_file_bytes, bool) or not isinstance(target_file_bytes, int) or target_file_bytes < 1:
        raise ConfigError(f"target_file_bytes {target_file_bytes!r}: give a positive number of bytes.")
    if hour_start.tzinfo is None:
        raise ConfigError(f"{hour_start}: use a timezone-aware datetime (UTC).")
    companion = settings.companion(SORT_DEMO_SUFFIX)
    copy = LakeTable(spark, companion.table_name, echo=echo)
    copy.apply(Statement(f"DROP TABLE IF EXISTS {copy.name} PURGE", writes=True))
    create_events_table(
        spark, companion, lambda _name, statement: (copy.apply if statement.writes else copy.run)(statement)
    )
    copy.apply(
        Statement(
            f"ALTER TABLE {copy.name} SET TBLPROPERTIES ('{TARGET_FILE_SIZE_PROPERTY}' = '{target_file_bytes}')",
            writes=True,
        )
    )
    columns = ", ".join(validate_identifier(column, "column") for column in spark.table(copy.name).columns)
    copy.apply(
        Statement(
            f"""
            INSERT INTO {copy.name}
            SELECT {columns} FROM {source.name}
            WHERE event_ts >= :start AND event_ts < :end
            """,
            {"start": hour_start, "end": hour_start + timedelta(hours=1)},
            writes=True,
        )
    )
    return copy
