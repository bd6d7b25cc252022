"""Statements and outcomes: the SQL text and bound values a learner sees, and the literal checks."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from icestream.errors import ConfigError
from icestream.lake.statement import Outcome, Statement, snapshot_id_literal, timestamp_literal


def test_statement_text_is_dedented_and_shows_bound_values() -> None:
    statement = Statement(
        """
        SELECT count(*) AS n
        FROM lake.ns.t
        WHERE event_ts > timestamp_micros(:start)
        """,
        {"start": 5},
    )
    assert statement.sql == "SELECT count(*) AS n\nFROM lake.ns.t\nWHERE event_ts > timestamp_micros(:start)"
    assert str(statement).splitlines()[-1] == "-- bound: :start = 5 (1970-01-01 00:00:00.000005 UTC)"
    assert not statement.writes
    assert str(Statement("SHOW TBLPROPERTIES lake.ns.t")) == "SHOW TBLPROPERTIES lake.ns.t"


def test_outcome_of_a_dry_run_has_no_output() -> None:
    outcome = Outcome(Statement("CALL lake.system.rewrite_manifests(table => 'ns.t')", writes=True), None)
    assert not outcome.ran
    assert outcome.counts == {}
    assert outcome.values("orphan_file_location") == []


def test_outcome_counts_are_the_numeric_columns_of_the_first_row() -> None:
    output = pd.DataFrame({"branch_updated": ["main"], "previous_ref": [1], "updated_ref": [2]})
    outcome = Outcome(Statement("CALL x.system.fast_forward(table => 'a.b')", writes=True), output)
    assert outcome.ran
    assert outcome.counts == {"previous_ref": 1, "updated_ref": 2}
    assert outcome.values("branch_updated") == ["main"]


def test_literals_that_sql_cannot_bind_are_checked() -> None:
    assert snapshot_id_literal(42) == 42
    assert snapshot_id_literal("-7") == -7
    for bad in ("1 OR 1=1", "0x10", 1.5, True):
        with pytest.raises(ConfigError):
            snapshot_id_literal(bad)
    moment = datetime(2026, 11, 19, 13, 5, 7, tzinfo=UTC)
    assert timestamp_literal(moment) == "TIMESTAMP '2026-11-19 13:05:07+00:00'"
    # A moment inside a second keeps its fraction: "older than now" truncated to the second left
    # the snapshots committed earlier in the same second unexpired (a CI flake of expire_archive).
    inside = moment.replace(microsecond=250_001)
    assert timestamp_literal(inside) == "TIMESTAMP '2026-11-19 13:05:07.250001+00:00'"
    with pytest.raises(ConfigError):
        timestamp_literal(datetime(2026, 11, 19))


def test_an_engine_with_other_markers_shows_its_own() -> None:
    statement = Statement("SELECT * FROM iceberg_scan($location)", {"location": "/m.json"}, marker="$")
    assert str(statement).splitlines()[-1] == "-- bound: $location = '/m.json'"


def test_an_aware_datetime_bound_value_reads_as_a_timestamp_literal() -> None:
    moment = datetime(2026, 11, 25, 8, 13, 43, tzinfo=UTC)
    statement = Statement("SELECT 1 WHERE :start < now()", {"start": moment})
    assert str(statement).splitlines()[-1] == "-- bound: :start = TIMESTAMP '2026-11-25 08:13:43+00:00'"


def test_epoch_microseconds_made_into_a_time_show_the_time_beside_them() -> None:
    spark_sql = Statement(
        "SELECT 1 FROM t WHERE ts > timestamp_micros(:start) AND n = :limit", {"start": 1795645742009000, "limit": 5}
    )
    assert str(spark_sql).endswith("-- bound: :start = 1795645742009000 (2026-11-25 22:29:02.009000 UTC), :limit = 5")
    duck_sql = Statement("WHERE event_ts > make_timestamptz($start::BIGINT)", {"start": 0, "startx": 7}, marker="$")
    assert str(duck_sql).endswith("-- bound: $start = 0 (1970-01-01 00:00:00.000000 UTC), $startx = 7")


def test_epoch_seconds_made_into_a_time_show_the_time_beside_them() -> None:
    """07's dashboard binds whole seconds (``timestamp_seconds``, DuckDB's ``to_timestamp``): a bare 1796224800
    said nothing to a reader."""
    spark_sql = Statement("SELECT 1 FROM t WHERE minute >= timestamp_seconds(:since)", {"since": 1796224800})
    assert str(spark_sql).endswith("-- bound: :since = 1796224800 (2026-12-02 15:20:00 UTC)")
    duck_sql = Statement("WHERE minute >= to_timestamp($since)", {"since": 1796224800}, marker="$")
    assert str(duck_sql).endswith("-- bound: $since = 1796224800 (2026-12-02 15:20:00 UTC)")


@given(st.datetimes(min_value=datetime(1, 1, 1), timezones=st.just(UTC)))
def test_a_timestamp_literal_has_four_year_digits_in_every_year(moment: datetime) -> None:
    # strftime's %Y gave '1-01-01' for year 1 and '999-...' for 999, which Spark refuses to parse.
    text = timestamp_literal(moment).removeprefix("TIMESTAMP '").removesuffix("+00:00'")
    assert datetime.fromisoformat(text).replace(tzinfo=UTC) == moment
    assert text[4] == "-"


def test_statements_run_inside_statements_hidden_print_nothing_and_showing_comes_back(capsys) -> None:
    from icestream.lake.statement import show, show_statements, statements_hidden, statements_shown

    show_statements()
    try:
        with statements_hidden():
            show(Statement("DROP TABLE lake.db.t_demo PURGE"))
            assert not statements_shown()
        show(Statement("SELECT 1"))
        assert capsys.readouterr().out.strip() == "SELECT 1"
    finally:
        show_statements(False)
