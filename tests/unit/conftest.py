"""Unit tests see settings as a user's shell would, not as an earlier integration test left them.

The session's ``test_home`` fixture (tests/conftest.py) exports a local ``ICESTREAM_WAREHOUSE`` for the
integration and notebook tests, and it stays exported for the rest of the session; an environment
variable outranks a profile's default, so the ``localstack`` and ``aws`` profiles' S3 warehouses
would be replaced by a local path in every unit test that runs after one of them.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _profile_defaults_not_the_sessions_warehouse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICESTREAM_WAREHOUSE", raising=False)
