"""Unit tests see settings as a user's shell would, not as an earlier integration test left them.

The session's ``test_home`` fixture (tests/conftest.py) exports a local ``ICESTREAM_WAREHOUSE`` for the
integration and notebook tests, and it stays exported for the rest of the session; an environment
variable outranks a profile's default, so the ``localstack`` and ``aws`` profiles' S3 warehouses
would be replaced by a local path in every unit test that runs after one of them.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _profile_defaults_not_the_sessions_warehouse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICESTREAM_WAREHOUSE", raising=False)


@pytest.fixture(autouse=True)
def _no_emulator_found_on_its_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test never finds a user's emulator on the emulator_port: no emulator runs for unit tests."""
    monkeypatch.setenv("ICESTREAM_EMULATOR_PORT", "0")


class SilentEndpoint(str):
    """The URL of an endpoint on 127.0.0.1 that accepts TCP connections and never answers.

    The kernel completes each connection into the listening socket's backlog; nothing reads or writes,
    so a client waits for an answer until its read timeout. The connections wait in the backlog, closed
    or not, until :meth:`connections` takes them: a count that needs no thread and no clock.
    """

    listener: socket.socket

    def connections(self) -> int:
        """How many connections were made since the last count."""
        count = 0
        self.listener.setblocking(False)
        while True:
            try:
                connection, _ = self.listener.accept()
            except BlockingIOError:
                return count
            connection.close()
            count += 1


@pytest.fixture
def silent_endpoint() -> Iterator[SilentEndpoint]:
    """A :class:`SilentEndpoint`, closed after the test."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        endpoint = SilentEndpoint(f"http://127.0.0.1:{listener.getsockname()[1]}")
        endpoint.listener = listener
        yield endpoint
