"""Instants as epoch microseconds, the one form time takes in SQL text, digests and indexes.

One rule everywhere: a naive ``datetime`` is read as UTC (Spark hands ``TIMESTAMP`` values back
naive in the session's time zone, which icestream sets to UTC), and every result is aware UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def as_utc(moment: datetime) -> datetime:
    """The same instant as an aware UTC datetime (a naive one is taken as UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch, exactly (integer arithmetic, no float rounding).

    Args:
        moment: The time; naive is taken as UTC.

    Returns:
        Epoch microseconds, the form bound into SQL (no time-zone guessing on either side).
    """
    if moment.tzinfo is UTC:  # the common case, without a conversion (the ingest calls this per record)
        return (moment - EPOCH) // _MICROSECOND
    return (as_utc(moment) - EPOCH) // _MICROSECOND


_LOWEST, _HIGHEST = to_micros(datetime.min), to_micros(datetime.max)


def from_micros(micros: int) -> datetime:
    """The aware UTC instant ``micros`` after the epoch, clamped to what ``datetime`` can hold."""
    return EPOCH + timedelta(microseconds=min(max(int(micros), _LOWEST), _HIGHEST))
