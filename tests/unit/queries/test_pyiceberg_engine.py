"""pyiceberg through Glue: a Glue that does not answer is the project's error, saying what to check."""

from __future__ import annotations

import pytest

from icestream.config import load_settings
from icestream.errors import ServiceUnavailableError
from icestream.queries import pyiceberg_engine as ice


def test_an_unreachable_glue_is_a_service_error() -> None:
    settings = load_settings(profile="localstack", kinesis_endpoint="http://127.0.0.1:9")  # discard port: nothing
    with pytest.raises(ServiceUnavailableError, match=r"Glue at http://127.0.0.1:9 did not answer"):
        ice.open_table(settings)


def test_a_scan_shows_the_call_it_makes() -> None:
    from datetime import UTC, datetime

    from pyiceberg.expressions import And, GreaterThan, LessThanOrEqual

    start, end = datetime(2026, 11, 25, 10, tzinfo=UTC), datetime(2026, 11, 25, 10, 15, tzinfo=UTC)
    scan = ice.Scan(start, end, ("event_type",), 42, ("run-a",))
    assert str(scan).splitlines() == [
        'table.scan(row_filter=And(GreaterThan("event_ts", "2026-11-25T10:00:00+00:00"), '
        'LessThanOrEqual("event_ts", "2026-11-25T10:15:00+00:00")), '
        "selected_fields=('event_type', 'properties'), snapshot_id=42).to_arrow()",
        "# then keep rows whose properties['run_id'] is in ['run-a'] (pyarrow)",
    ]
    built = scan.row_filter()  # the filter the call text describes
    assert isinstance(built, And)
    assert isinstance(built.left, GreaterThan)
    assert isinstance(built.right, LessThanOrEqual)
    assert str(ice.Scan()) == "table.scan(row_filter=AlwaysTrue(), selected_fields=('*',), snapshot_id=None).to_arrow()"
