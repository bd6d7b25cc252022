"""The lease record: its property form, expiry, and telling a dead holder on this machine (no JVM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from icestream.errors import IngestError
from icestream.ingest.lease import Holder, Identity, Lease


def holder(identity: Identity, expires: float = 2_000_000_000.0) -> Holder:
    return Holder("0123abcd", identity.host, identity.pid, identity.pid_namespace, 1_800_000_000.0, expires)


def test_the_property_round_trips() -> None:
    recorded = holder(Identity.current())
    assert Holder.from_property(recorded.to_property()) == recorded
    assert "since 2027-01-15 08:00:00 UTC" in recorded.describe()


@pytest.mark.parametrize("value", [None, "", "not json", "{}", '{"lease_id": "x", "pid": "one"}', "[1, 2]"])
def test_a_property_this_module_did_not_write_fences_nobody(value: str | None) -> None:
    assert Holder.from_property(value) is None


def test_a_lease_expires() -> None:
    recorded = holder(Identity.current(), expires=100.0)
    assert recorded.live(99.0)
    assert not recorded.live(100.0)


def test_a_dead_holder_on_this_machine_frees_the_lease_at_once() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    here = Identity.current()
    recorded = holder(Identity(here.host, child.pid, here.pid_namespace))
    assert recorded.live(0.0)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert not recorded.live(0.0)


def test_an_unreaped_zombie_holder_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    here = Identity.current()
    try:
        assert not holder(Identity(here.host, child.pid, here.pid_namespace)).live(0.0)
    finally:
        child.wait()


@pytest.mark.parametrize(
    "elsewhere",
    [
        Identity("another-host", 2**22 + 7, "pid:[4026531836]"),  # another machine: only expiry tells
        Identity(Identity.current().host, 2**22 + 7, "pid:[1]"),  # another container on this host
        Identity(Identity.current().host, 2**22 + 7, ""),  # a platform without pid namespaces
    ],
)
def test_a_holder_elsewhere_is_live_until_expiry(elsewhere: Identity) -> None:
    assert holder(elsewhere).live(0.0)  # pid 2**22 + 7 runs nowhere here, yet it is not trusted


def test_the_ttl_must_be_positive() -> None:
    with pytest.raises(IngestError, match="ttl_seconds"):
        Lease(spark=None, table="lake.ns.t", ttl_seconds=0)  # type: ignore[arg-type]
