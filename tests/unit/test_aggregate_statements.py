"""07 and 08 type the statements they teach in ``spark.sql`` calls of their cells (CONVENTIONS rule 8).

07's lesson is the ``MERGE`` that folds a batch's per-minute groups into the metrics table; 08's is
the query that counts events per sliding window and type. Each must be SQL a learner edits and runs
again in a cell, not a statement a helper builds and runs out of sight (``fold_statement``,
``window_counts``); the notebooks' own checks hold the typed statement to the library's result.
"""

from __future__ import annotations

import re

import pytest

from tests.helpers.notebook_code import spark_sql_texts

FOLD = "07_continuous_aggregate.ipynb"
WINDOWS = "08_anomaly_detection.ipynb"
TAUGHT = (
    (FOLD, (r"MERGE INTO \{", r"USING \(SELECT", r"GROUP BY", r"WHEN MATCHED THEN UPDATE SET", r"array_union\(",
            r"WHEN NOT MATCHED THEN INSERT")),
    (FOLD, (r"CREATE TABLE IF NOT EXISTS \{metrics_name\}", r"USING iceberg", r"PARTITIONED BY \(days\(minute\)\)",
            r"'write.merge.mode' = 'merge-on-read'", r"'icestream.metrics.source' = ")),
    (FOLD, (r"CREATE OR REPLACE VIEW \{view\} AS", r"SELECT minute, event_type, device_type, events, unique_users",
            r"FROM \{metrics_name\}")),
    (WINDOWS, (r"window\(event_ts, :window_length, :slide\)", r"GROUP BY window\(", r"event_ts >= :start",
               r"event_ts < :end", r"properties\['run_id'\] = :run_id")),
    (WINDOWS, (r"WITH event_rates AS", r"STDDEV\(events_per_second\)", r"ha\.avg_rate \+ 2 \* ha\.stddev_rate",
               r"ha\.avg_rate - 2 \* ha\.stddev_rate", r"window\(event_ts, :window_length, :slide\)")),
)  # fmt: skip


@pytest.mark.parametrize(
    ("notebook", "patterns"), TAUGHT, ids=[f"{notebook}-{patterns[0]}" for notebook, patterns in TAUGHT]
)
def test_the_taught_statement_is_typed_in_one_spark_sql_cell(notebook: str, patterns: tuple[str, ...]) -> None:
    typed = [text for text in spark_sql_texts(notebook) if all(re.search(pattern, text) for pattern in patterns)]
    assert typed, f"{notebook}: no spark.sql(...) call holds all of {patterns}"


def test_values_in_the_window_query_are_bound_not_pasted() -> None:
    queries = [text for text in spark_sql_texts(WINDOWS) if "window(event_ts" in text]
    assert len(queries) == 2, "the detector's counts and the reference design's avg ± 2σ"
    for query in queries:  # only the checked table name is formatted in; times, the run id and durations are :markers
        assert re.findall(r"\{([^}]*)\}", query) == ["events_table.name"]


def test_07_types_the_aggregate_the_library_keeps() -> None:
    """07 types its metrics table's DDL and its view (they were behind ``create_metrics_table`` and
    ``create_metrics_view``); the ingest's own ``create_metrics_table`` makes the same table: the same columns of
    the same types in the same order, the same row-level modes, and the mark of the events table it follows."""
    from icestream.lake.continuous_aggregate import ANSWER_COLUMNS, METRICS_COLUMNS_DDL, SOURCE_PROPERTY
    from icestream.lake.rowlevel import MODE_PROPERTIES

    (ddl,) = [text for text in spark_sql_texts(FOLD) if "CREATE TABLE IF NOT EXISTS {metrics_name}" in text]
    ddl = ddl.replace("\\n", "\n")  # the cell's f-string, unparsed: its line breaks as escapes
    columns = re.search(r"\{metrics_name\} \((.*)\) USING iceberg", ddl, re.DOTALL).group(1)
    typed = [" ".join(column.split()) for column in columns.split(",\n")]
    kept = [re.sub(r" COMMENT '.*'$", "", column) for column in METRICS_COLUMNS_DDL]
    assert typed == kept
    for mode in MODE_PROPERTIES:
        assert f"'{mode}' = 'merge-on-read'" in ddl
    assert f"'{SOURCE_PROPERTY}' = '{{settings.table_name}}'" in ddl
    (view,) = [text for text in spark_sql_texts(FOLD) if "CREATE OR REPLACE VIEW" in text]
    assert f"SELECT {', '.join(ANSWER_COLUMNS)} FROM {{metrics_name}}" in " ".join(view.split())
