"""Which Python values the exact converters take, and that they sit ahead of PySpark's (no JVM here).

The instants they send are checked against Spark in tests/integration/test_literals.py.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from py4j import protocol
from pyspark.sql.types import DateConverter, DatetimeConverter

from icestream.runtime import literals


def test_datetimes_and_dates_go_to_their_own_converter() -> None:
    assert literals.InstantConverter().can_convert(datetime(1, 1, 1, tzinfo=UTC))
    assert not literals.InstantConverter().can_convert(date(1, 1, 1))
    assert literals.LocalDateConverter().can_convert(date(1, 1, 1))
    assert not literals.LocalDateConverter().can_convert(datetime(1, 1, 1, tzinfo=UTC)), "a datetime is a date too"


def test_install_puts_them_ahead_of_pysparks_once() -> None:
    literals.install()
    literals.install()
    kinds = [type(converter) for converter in protocol.INPUT_CONVERTER]
    assert kinds.count(literals.InstantConverter) == 1
    assert kinds.count(literals.LocalDateConverter) == 1
    assert kinds.index(literals.InstantConverter) < kinds.index(DatetimeConverter)
    assert kinds.index(literals.LocalDateConverter) < kinds.index(DateConverter)
