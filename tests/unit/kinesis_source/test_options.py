"""The source's options: their spellings, their meaning, and one clear error for each misuse."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime

import pytest

from icestream.errors import ConfigError
from icestream.kinesis_source.options import DEFAULT_RECORDS_PER_SHARD, NAMES, parse_options
from icestream.limits import MAX_RECORDS_PER_GET

BASE = {"streamName": "events", "regionName": "us-east-1"}


def test_the_reference_names_and_awslabs_spellings_mean_the_same() -> None:
    reference = parse_options(
        {
            "streamName": "events",
            "regionName": "eu-west-1",
            "endpointUrl": "http://127.0.0.1:4567",
            "startingPosition": "trim_horizon",
            "maxFetchRecordsPerShard": "500",
        }
    )
    awslabs = parse_options(
        {
            "kinesis.streamName": "events",
            "kinesis.region": "eu-west-1",
            "kinesis.endpointUrl": "http://127.0.0.1:4567",
            "kinesis.startingPosition": "trim_horizon",
            "kinesis.maxFetchRecordsPerShard": "500",
        }
    )
    assert awslabs == reference
    assert (reference.stream_name, reference.region, reference.endpoint) == (
        "events",
        "eu-west-1",
        "http://127.0.0.1:4567",
    )
    assert (reference.starting, reference.max_records_per_shard) == ("trim_horizon", 500)


def test_options_are_matched_without_regard_to_case_as_spark_lower_cases_them() -> None:
    folded = parse_options(
        {
            "kinesis.streamname": "events",
            "kinesis.region": "us-east-1",
            "startingposition": "TRIM_HORIZON",
            "maxfetchrecordspershard": "7",
            "shardspertask": "3",
            "kinesis.awsstsrolearn": "arn:aws:iam::1:role/r",
            "maxeventbytes": "2048",
        }
    )
    assert folded.stream_name == "events"
    assert folded.starting == "trim_horizon"
    assert (folded.max_records_per_shard, folded.shards_per_task, folded.max_event_bytes) == (7, 3, 2048)
    assert folded.role_arn == "arn:aws:iam::1:role/r"


def test_defaults() -> None:
    options = parse_options(BASE)
    assert options.starting == "latest"
    assert options.endpoint is None
    assert options.role_arn is None
    assert options.starting_timestamp is None
    assert options.starting_shards is None
    assert options.max_records_per_shard == DEFAULT_RECORDS_PER_SHARD
    assert options.shards_per_task == 1


def test_an_unknown_option_names_every_accepted_one() -> None:
    with pytest.raises(ConfigError, match="no option 'streamname2'") as caught:
        parse_options({**BASE, "streamname2": "x"})
    message = str(caught.value)
    for name, others in NAMES.items():
        assert name in message
        for other in others:
            assert other in message


def test_a_path_is_refused_with_the_option_to_use_instead() -> None:
    with pytest.raises(ConfigError, match="streamName, not as load"):
        parse_options({**BASE, "path": "events"})


def test_one_option_given_twice_with_two_values_is_refused() -> None:
    with pytest.raises(ConfigError, match="streamName is given twice, as 'a' and 'b'"):
        parse_options({"streamName": "a", "kinesis.streamName": "b", "regionName": "us-east-1"})


def test_one_option_given_twice_with_the_same_value_is_fine() -> None:
    options = parse_options({"streamName": "a", "kinesis.streamname": "a", "region": "us-east-1"})
    assert options.stream_name == "a"


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({"regionName": "us-east-1"}, "streamName"),
        ({"streamName": "events"}, "regionName"),
        ({"streamName": "  ", "regionName": "us-east-1"}, "streamName"),
    ],
)
def test_a_missing_stream_name_or_region_is_named(given: dict[str, str], missing: str) -> None:
    with pytest.raises(ConfigError, match=f"needs option {missing}"):
        parse_options(given)


@pytest.mark.parametrize("text", ["0", "-3", "ten", "1.5", "", str(100 * MAX_RECORDS_PER_GET + 1)])
def test_a_bad_record_cap_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="maxFetchRecordsPerShard is a whole number of at least 1"):
        parse_options({**BASE, "maxFetchRecordsPerShard": text})


def test_the_record_cap_may_be_its_highest() -> None:
    highest = 100 * MAX_RECORDS_PER_GET
    assert parse_options({**BASE, "maxFetchRecordsPerShard": str(highest)}).max_records_per_shard == highest


@pytest.mark.parametrize("name", ["shardsPerTask", "maxEventBytes"])
def test_other_counts_must_be_positive_whole_numbers(name: str) -> None:
    with pytest.raises(ConfigError, match=f"{name} is a whole number of at least 1, not 'zero'"):
        parse_options({**BASE, name: "zero"})


def test_an_endpoint_must_be_an_http_url() -> None:
    with pytest.raises(ConfigError, match="endpointUrl is an http"):
        parse_options({**BASE, "endpointUrl": "localhost:4567"})


@pytest.mark.parametrize("text", ["latest", "LATEST", " Latest "])
def test_starting_latest(text: str) -> None:
    assert parse_options({**BASE, "startingPosition": text}).starting == "latest"


def test_starting_at_an_iso_time_without_a_zone_is_utc() -> None:
    options = parse_options({**BASE, "startingPosition": "at_timestamp:2026-12-01T10:00:00"})
    assert options.starting == "at_timestamp"
    assert options.starting_timestamp == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def test_starting_at_an_iso_time_keeps_its_zone() -> None:
    options = parse_options({**BASE, "startingPosition": "AT_TIMESTAMP:2026-12-01T12:00:00+02:00"})
    assert options.starting_timestamp == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def test_starting_at_epoch_seconds_is_the_same_moment_in_any_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = os.environ.get("TZ")
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        options = parse_options({**BASE, "startingPosition": "at_timestamp:1795000000.5"})
    finally:
        if previous is None:
            monkeypatch.delenv("TZ")
        else:
            monkeypatch.setenv("TZ", previous)
        time.tzset()
    assert options.starting_timestamp == datetime.fromtimestamp(1795000000.5, UTC)
    assert options.starting_timestamp.tzinfo is not None


@pytest.mark.parametrize("text", ["at_timestamp:yesterday", "at_timestamp:1e300", "at_timestamp:inf"])
def test_a_starting_time_that_is_no_time_is_refused_clearly(text: str) -> None:
    with pytest.raises(ConfigError, match="give an ISO time"):
        parse_options({**BASE, "startingPosition": text})


@pytest.mark.parametrize("text", ["at_timestamp:", "earliest", "AFTER:1000"])
def test_an_unknown_starting_position_lists_the_accepted_ones(text: str) -> None:
    with pytest.raises(ConfigError, match="startingPosition is one of latest, trim_horizon, at_timestamp"):
        parse_options({**BASE, "startingPosition": text})


def test_starting_at_shard_positions_given_as_json() -> None:
    positions = {"shardId-0": "AFTER:1005", "shardId-1": "TRIM_HORIZON", "shardId-2": "END:900"}
    for text in (json.dumps(positions), json.dumps({"shards": positions})):
        options = parse_options({**BASE, "startingPosition": text})
        assert options.starting == "positions"
        assert options.starting_shards == positions


def test_a_start_inside_a_kpl_aggregate_is_refused_not_rounded_past_its_rest() -> None:
    positions = {"shardId-0": "AFTER:1005", "shardId-1": "AFTER:2001:3"}
    with pytest.raises(ConfigError, match="shardId-1 starts inside a KPL aggregate"):
        parse_options({**BASE, "startingPosition": json.dumps(positions)})


@pytest.mark.parametrize(
    "text",
    ['{"shardId-0": "AFTER:1"', '{"shardId-0": "SOMEWHERE"}', '{"shardId-0": 5}', '{"shards": ["shardId-0"]}'],
)
def test_malformed_shard_positions_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="startingPosition as JSON maps shard ids to positions"):
        parse_options({**BASE, "startingPosition": text})


@pytest.mark.parametrize(
    ("endpoint", "profile"),
    [
        ("http://127.0.0.1:4567", "local"),
        ("http://localhost:4567", "local"),
        ("http://LOCALHOST:1", "local"),
        ("http://[::1]:4567", "local"),
        ("https://kinesis.us-east-1.amazonaws.com", "aws"),
        ("http://10.0.0.5:4567", "aws"),
        (None, "aws"),
    ],
)
def test_the_profile_is_local_only_for_an_endpoint_on_this_machine(endpoint: str | None, profile: str) -> None:
    given = {**BASE, "endpointUrl": endpoint} if endpoint else BASE
    assert parse_options(given).profile == profile
