"""Kinesis clients: the cheap timestamp parser gives the same instants as botocore's own."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.utils import parse_timestamp

from icestream.kinesis.clients import utc_timestamp
from tests.unit.conftest import SilentEndpoint


@pytest.mark.parametrize("value", [0, 1_763_704_800, 1_763_704_800.123, "2026-11-21T06:00:00Z", "1763704800"])
def test_same_instant_as_botocore(value: object) -> None:
    ours, theirs = utc_timestamp(value), parse_timestamp(value)
    assert ours == theirs
    assert ours.utcoffset() is not None


def test_epoch_numbers_become_utc_datetimes() -> None:
    assert utc_timestamp(1_763_704_800.5) == datetime(2025, 11, 21, 6, 0, 0, 500000, tzinfo=UTC)
    assert utc_timestamp(1_763_704_800).tzinfo is UTC


@pytest.mark.parametrize(("call", "tries"), [("ensure_stream", "2 tries"), ("check_kinesis", "1 try")])
def test_an_endpoint_that_never_answers_is_given_up_after_the_kinesis_timeout(
    silent_endpoint: SilentEndpoint, call: str, tries: str
) -> None:
    # Issue 58: setup waited 120 s of silence (four tries of 30 s: botocore's max_attempts counts retries).
    from icestream.config import load_settings
    from icestream.errors import ServiceUnavailableError
    from icestream.kinesis import clients

    settings = load_settings(kinesis_endpoint=silent_endpoint, kinesis_timeout=0.2)
    with pytest.raises(ServiceUnavailableError) as given_up:
        getattr(clients, call)(settings)
    message = str(given_up.value)
    assert message.startswith(
        f"Kinesis at {silent_endpoint} does not answer: it accepted the connection, then said nothing for 0.2 s "
        f"({tries})."
    ), message
    assert silent_endpoint.connections() == int(tries.split()[0]), "one connection a try, as many as it says"
    assert "ICESTREAM_KINESIS_TIMEOUT" in message, "the message names the setting that waits longer"
    assert "\n" not in message


def test_the_waiting_line_names_the_endpoint_and_how_long_each_call_may_take(silent_endpoint: str) -> None:
    from icestream.config import load_settings
    from icestream.kinesis.clients import SETUP_ATTEMPTS, waiting_for_kinesis

    line = waiting_for_kinesis(load_settings(kinesis_endpoint=silent_endpoint, kinesis_timeout=2.5))
    assert line == (
        f"waiting for the Kinesis endpoint at {silent_endpoint} (at most 2.5 s a call, {SETUP_ATTEMPTS} tries: "
        "ICESTREAM_KINESIS_TIMEOUT) ..."
    )
    aws = load_settings(profile="aws", warehouse="s3://bucket/warehouse", region="eu-west-1", kinesis_timeout=10)
    assert waiting_for_kinesis(aws).startswith("waiting for the Kinesis endpoint of AWS in eu-west-1 (at most 10 s")
