"""Ingest options: defaults from the settings, validation and trigger parsing (no JVM)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from icestream.config import load_settings
from icestream.errors import ConfigError
from icestream.ingest.options import MAX_TRIGGER_SECONDS, MIN_TRIGGER_SECONDS, ingest_options, parse_trigger


def test_start_position_setting_is_the_default_starting_position(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICESTREAM_START_POSITION", "latest")
    options = ingest_options(load_settings())
    assert options.starting_position == "latest"


def test_an_explicit_starting_position_wins_over_the_setting() -> None:
    settings = load_settings(start_position="latest")
    assert ingest_options(settings, starting_position="trim_horizon").starting_position == "trim_horizon"
    assert ingest_options(settings, starting_position=None).starting_position == "latest"


def test_unknown_option_is_named() -> None:
    with pytest.raises(ConfigError, match=r"unknown ingest option.*: trigger"):
        ingest_options(load_settings(), trigger="5s")


def test_lookback_in_seconds_becomes_a_timedelta() -> None:
    assert ingest_options(load_settings(), dedupe_lookback=90).dedupe_lookback == timedelta(seconds=90)


@pytest.mark.parametrize(
    ("option", "value", "name"),
    [
        ("max_records_per_shard", 0, "max_records_per_shard"),
        ("trigger_seconds", -1, "trigger_seconds"),
        ("starting_position", "earliest", "starting_position"),
        ("starting_position", "at_timestamp", "starting_timestamp"),
        ("batch_retries", -1, "batch_retries"),
        ("min_records", 0, "min_records"),
        ("max_trigger_delay_seconds", -1.0, "max_trigger_delay_seconds"),
    ],
)
def test_invalid_values_are_refused_naming_the_option(option: str, value: object, name: str) -> None:
    with pytest.raises(ConfigError, match=f"ingest option {name}"):
        ingest_options(load_settings(), **{option: value}).validated()


def test_min_records_is_off_by_default_and_the_delay_is_sparks_15_minutes() -> None:
    options = ingest_options(load_settings()).validated()
    assert options.min_records is None
    assert options.max_trigger_delay_seconds == 900.0
    assert ingest_options(load_settings(), min_records=1, max_trigger_delay_seconds=0).validated().min_records == 1


@pytest.mark.parametrize(("text", "seconds"), [("5s", 5.0), ("500ms", 0.5), ("1m", 60.0), ("2", 2.0), ("0", 0.0)])
def test_parse_trigger(text: str, seconds: float) -> None:
    assert parse_trigger(text) == seconds


@pytest.mark.parametrize("text", ["fast", "-1s", "5 parsecs", "", "inf", "-inf", "nan", "1e400ms"])
def test_parse_trigger_refuses_other_text(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_trigger(text)


def test_the_metrics_follow_the_settings_and_only_an_event_stream_into_one_table() -> None:
    settings = load_settings(metrics=True, table="clicks")
    assert ingest_options(settings).metrics is True
    assert settings.metrics_table_name == "lake.streaming_analytics.clicks_metrics"
    assert ingest_options(settings, metrics=False).metrics is False
    with pytest.raises(ConfigError, match="ingest option metrics: follows the one events table"):
        ingest_options(settings, routing="event_type").validated()
    changes = load_settings(metrics=True, changes_columns="id bigint, v bigint", changes_key="id")
    with pytest.raises(ConfigError, match="ingest option metrics: follows an events table, not a change stream"):
        ingest_options(changes).validated()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"trigger_seconds": 0}, "0 s is below 0.2 s"),
        ({"trigger_seconds": 0.199}, "0.199 s is below 0.2 s"),
        ({"trigger_seconds": 60.5}, "60.5 s is above 60 s"),
        ({"trigger_seconds": float("inf")}, "inf s is above 60 s"),
        ({"trigger_seconds": float("nan")}, "nan s is not a time"),
        ({"trigger_seconds": float("inf"), "available_now": True}, "inf s is above 60 s"),
        ({"max_trigger_delay_seconds": float("inf"), "min_records": 5}, "must be 0 or more seconds, and finite"),
    ],
)
def test_a_trigger_is_bounded(options: dict[str, object], message: str) -> None:
    # Kinesis allows 5 GetRecords a second per shard: 200 ms. inf ran a batch, then failed on a timestamp.
    with pytest.raises(ConfigError, match=f"ingest option [a-z_]+: {message}"):
        ingest_options(load_settings(), **options).validated()


def test_a_drain_may_run_its_batches_back_to_back_and_the_bounds_are_allowed() -> None:
    settings = load_settings()
    assert ingest_options(settings, trigger_seconds=0, available_now=True).validated().trigger_seconds == 0
    for seconds in (MIN_TRIGGER_SECONDS, MAX_TRIGGER_SECONDS):
        assert ingest_options(settings, trigger_seconds=seconds).validated().trigger_seconds == seconds
    assert (MIN_TRIGGER_SECONDS, MAX_TRIGGER_SECONDS) == (0.2, 60.0)
