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
