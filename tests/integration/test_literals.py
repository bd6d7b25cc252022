"""Python datetimes and dates reach Spark as the instant and day they name, years 1 to 9999 (issue 43).

Each example is a list of values checked in one Spark job (a job per value would make the property
test a minute long); every path a value takes from Python into Spark is compared with the exact
epoch microseconds of :func:`icestream.to_micros`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from icestream.timestamps import to_micros

# Every instant the parser accepts: years 1 to 9999 in UTC, with the offsets payloads carry.
OFFSETS = st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12, minutes=-30))])
INSTANTS = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=OFFSETS)
EDGES = [
    datetime(1, 1, 1, tzinfo=UTC),  # Go's zero time, .NET's DateTime.MinValue
    datetime(1582, 10, 4, 23, 59, 59, 999999, tzinfo=UTC),  # the last Julian day
    datetime(1582, 10, 15, tzinfo=UTC),  # the first Gregorian one
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


@hypothesis_settings(max_examples=25)
@given(st.lists(INSTANTS, min_size=1, max_size=20))
def test_datetimes_keep_their_instant_through_every_way_into_spark(spark, moments: list[datetime]) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    moments = EDGES + moments
    expected = [to_micros(moment) for moment in moments]
    row = spark.range(1).select(
        *(F.unix_micros(F.lit(moment)).alias(f"lit{n}") for n, moment in enumerate(moments)),
        *((F.timestamp_micros(F.lit(micros)) == moment).alias(f"eq{n}") for n, (micros, moment) in
          enumerate(zip(expected, moments, strict=True))),
    ).first()  # fmt: skip
    assert [row[f"lit{n}"] for n in range(len(moments))] == expected
    assert all(row[f"eq{n}"] for n in range(len(moments))), "a Column compared with a datetime"
    names = {f"t{n}": moment for n, moment in enumerate(moments)}
    bound = spark.sql("SELECT " + ", ".join(f"unix_micros(:{name}) AS {name}" for name in names), args=names).first()
    assert [bound[name] for name in names] == expected, "spark.sql(args=...) with datetimes"


def test_a_naive_datetime_is_utc(spark) -> None:
    """The project's one rule (icestream.timestamps), where PySpark used the process's local zone."""
    from pyspark.sql import functions as F  # noqa: N812

    moments = [datetime(1, 1, 1), datetime(2026, 11, 26, 21, 0, 0, 1)]
    row = spark.range(1).select(*(F.unix_micros(F.lit(moment)).alias(f"t{n}") for n, moment in enumerate(moments)))
    assert list(row.first()) == [to_micros(moment.replace(tzinfo=UTC)) for moment in moments]


@hypothesis_settings(max_examples=10)
@given(st.lists(st.dates(min_value=date(1, 1, 1)), min_size=1, max_size=20))
def test_dates_keep_their_day(spark, days: list[date]) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    row = spark.range(1).select(*(F.unix_date(F.lit(day)).alias(f"d{n}") for n, day in enumerate(days))).first()
    assert [row[f"d{n}"] for n in range(len(days))] == [day.toordinal() - date(1970, 1, 1).toordinal() for day in days]
