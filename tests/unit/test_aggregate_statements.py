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
    (WINDOWS, (r"window\(event_ts, :window_length, :slide\)", r"GROUP BY window\(", r"event_ts >= :start",
               r"event_ts < :end", r"properties\['run_id'\] = :run_id")),
)  # fmt: skip


@pytest.mark.parametrize(("notebook", "patterns"), TAUGHT, ids=[notebook for notebook, _ in TAUGHT])
def test_the_taught_statement_is_typed_in_one_spark_sql_cell(notebook: str, patterns: tuple[str, ...]) -> None:
    typed = [text for text in spark_sql_texts(notebook) if all(re.search(pattern, text) for pattern in patterns)]
    assert typed, f"{notebook}: no spark.sql(...) call holds all of {patterns}"


def test_values_in_the_window_query_are_bound_not_pasted() -> None:
    (query,) = [text for text in spark_sql_texts(WINDOWS) if "window(event_ts" in text]
    # Only the checked table name is formatted in; times, the run id and durations are :markers.
    assert re.findall(r"\{([^}]*)\}", query) == ["events_table.name"]
