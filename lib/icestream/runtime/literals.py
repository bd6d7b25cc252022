"""Python datetimes and dates reach Spark as the instant and the day they name, for any year 1-9999.

PySpark 3.5 turns a ``datetime`` given to ``F.lit``, to a Column comparison or to
``spark.sql(args=...)`` into a ``java.sql.Timestamp``, and a ``date`` into a ``java.sql.Date``;
Spark then reads those through the hybrid Julian/Gregorian calendar they use and rebases them to
its own proleptic Gregorian one. Every value before 1582-10-15 moves:
``F.lit(datetime(1, 1, 1, tzinfo=UTC))`` is ``0001-01-03``, ``datetime(1000, 1, 1)`` becomes
``0999-12-27``. Rows are not affected (``createDataFrame``, Arrow and ``collect`` move epoch
microseconds as they are), so a filter built from a literal disagreed with the rows it filtered:
the dedupe index's load missed every event dated ``0001-01-01T00:00:00Z`` (issue 43). PySpark
ignores ``spark.sql.datetime.java8API.enabled`` for these inputs, and Spark has no setting that
skips the rebase for ``java.sql`` values.

:func:`install` puts converters ahead of PySpark's that send ``java.time.Instant`` and
``java.time.LocalDate`` instead, which Spark takes without a rebase (what the java8 API does for
its own conversions). A naive datetime is taken as UTC, the project's one rule
(:mod:`icestream.timestamps`), where PySpark used the Python process's local time zone.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from icestream.timestamps import to_micros

_MICROS_PER_SECOND = 1_000_000
_EPOCH_DAY = date(1970, 1, 1).toordinal()


class InstantConverter:
    """py4j input converter: ``datetime`` to ``java.time.Instant`` (exact to the microsecond)."""

    def can_convert(self, value: Any) -> bool:
        """Aware datetimes always; naive ones unless Spark is asked to prefer TIMESTAMP_NTZ."""
        if not isinstance(value, datetime):
            return False
        if value.tzinfo is not None:
            return True
        from pyspark.sql.utils import is_timestamp_ntz_preferred

        # A naive datetime then means a TIMESTAMP_NTZ (wall-clock fields, no calendar rebase either).
        return not is_timestamp_ntz_preferred()

    def convert(self, value: datetime, gateway_client: Any) -> Any:
        """The ``Instant`` ``value`` names (naive taken as UTC)."""
        from py4j.java_gateway import JavaClass

        seconds, micros = divmod(to_micros(value), _MICROS_PER_SECOND)
        return JavaClass("java.time.Instant", gateway_client).ofEpochSecond(seconds, micros * 1000)


class LocalDateConverter:
    """py4j input converter: ``date`` (not ``datetime``) to ``java.time.LocalDate``."""

    def can_convert(self, value: Any) -> bool:
        """Dates that are not datetimes (a datetime is a date subclass)."""
        return isinstance(value, date) and not isinstance(value, datetime)

    def convert(self, value: date, gateway_client: Any) -> Any:
        """The ``LocalDate`` of the same proleptic Gregorian day."""
        from py4j.java_gateway import JavaClass

        return JavaClass("java.time.LocalDate", gateway_client).ofEpochDay(value.toordinal() - _EPOCH_DAY)


def install() -> None:
    """Put the converters ahead of PySpark's, once per process (py4j's list is global).

    Idempotent: called on every :func:`icestream.runtime.spark.get_spark`.
    """
    import pyspark.sql.types  # noqa: F401 - registers PySpark's converters, which ours must precede
    from py4j import protocol

    if any(isinstance(converter, InstantConverter) for converter in protocol.INPUT_CONVERTER):
        return
    protocol.register_input_converter(LocalDateConverter(), prepend=True)
    protocol.register_input_converter(InstantConverter(), prepend=True)
