"""Fencing of a second ingest: the lease on a table, through the session's catalog."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from icestream.config import load_settings
from icestream.errors import IngestError
from icestream.ingest.lease import LEASE_PROPERTY, Identity, Lease, lease_holder
from icestream.lake import ddl
from icestream.lake.table import setup_tables


@pytest.fixture
def table(spark, settings):
    """A fresh events table per test, so each starts with no lease."""
    local = load_settings(table=f"lease_{uuid.uuid4().hex[:10]}")
    names = [table.name for table in setup_tables(spark, local)]
    yield names[0]
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")


def property_of(spark, table: str) -> str | None:
    return ddl.table_properties(spark, table).set_index("key")["value"].get(LEASE_PROPERTY)


def test_a_second_acquirer_is_refused_with_one_line_naming_the_holder(spark, table) -> None:
    first, second = Lease(spark, table), Lease(spark, table)
    held = first.acquire()
    assert lease_holder(spark, table) == held
    assert property_of(spark, table) == held.to_property()  # visible in SHOW TBLPROPERTIES
    with pytest.raises(IngestError) as refused:
        second.acquire()
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert f"pid {os.getpid()}" in message
    assert f"host {held.host}" in message
    assert "since " in message
    assert "Stop that ingest first" in message
    assert second.held is None
    assert lease_holder(spark, table) == held  # the refused acquirer changed nothing


def test_of_two_racing_acquirers_exactly_one_wins(spark, table) -> None:
    leases = [Lease(spark, table) for _ in range(2)]
    start = threading.Barrier(len(leases))
    outcomes: dict[int, str] = {}

    def race(index: int) -> None:
        start.wait()
        try:
            leases[index].acquire()
            outcomes[index] = "won"
        except IngestError:
            outcomes[index] = "refused"

    threads = [threading.Thread(target=race, args=(index,)) for index in range(len(leases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert sorted(outcomes.values()) == ["refused", "won"]
    winner = next(lease for index, lease in enumerate(leases) if outcomes[index] == "won")
    assert lease_holder(spark, table) == winner.held


def test_release_makes_the_table_acquirable_at_once(spark, table) -> None:
    first, second = Lease(spark, table), Lease(spark, table)
    first.acquire()
    assert first.release() is True
    assert first.release() is False  # nothing held any more
    assert lease_holder(spark, table) is None
    assert second.acquire().lease_id != ""
    with second:  # the context manager releases on exit
        pass
    assert property_of(spark, table) is None


def test_renewal_extends_and_a_lost_lease_stops_the_old_holder(spark, table) -> None:
    now = [time.time()]
    first = Lease(spark, table, ttl_seconds=60, clock=lambda: now[0])
    with pytest.raises(IngestError, match="call acquire"):
        first.renew()
    acquired = first.acquire()
    assert first.renew() == acquired  # not due yet: no commit
    now[0] += 20
    renewed = first.renew()
    assert (renewed.since, renewed.expires) == (acquired.since, acquired.expires + 20)
    assert lease_holder(spark, table) == renewed
    # The holder stalls past its lease; another ingest takes the table over.
    later = Lease(spark, table, clock=lambda: now[0] + 61)
    later.acquire()
    with pytest.raises(IngestError, match=r"lost its lease .*now held by host"):
        first.renew(force=True)
    assert first.release() is False  # never removes the new holder's lease
    assert lease_holder(spark, table) == later.held


def test_a_dead_holder_on_this_machine_is_replaced_at_once(spark, table) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    here = Identity.current()
    Lease(spark, table, ttl_seconds=600, identity=Identity(here.host, sleeper.pid, here.pid_namespace)).acquire()
    with pytest.raises(IngestError, match=f"pid {sleeper.pid}"):
        Lease(spark, table).acquire()
    sleeper.send_signal(signal.SIGKILL)
    sleeper.wait()
    assert Lease(spark, table).acquire().pid == os.getpid()  # no need to wait 600 s


HOLDER = """
import os, sys, time
from icestream.config import load_settings
from icestream.ingest.lease import Identity, Lease
from icestream.runtime.spark import get_spark

spark = get_spark(load_settings(), app_name="lease-holder")
# Recorded as another machine's, so only expiry can free it (on this machine a dead pid frees it at once).
lease = Lease(spark, sys.argv[1], ttl_seconds=float(sys.argv[2]), identity=Identity("another-host", os.getpid(), ""))
lease.acquire()
print("acquired", flush=True)
while True:  # keeps its lease alive (a renewal a second) until it is killed
    time.sleep(1)
    lease.renew(force=True)
"""


def test_a_sigkilled_holder_is_replaced_after_its_lease_expires(spark, table) -> None:
    ttl = 30.0
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, table, str(ttl)], stdout=subprocess.PIPE, text=True)
    # The contender reads the time from this clock, so the test moves past the expiry instead of waiting for it.
    now = [time.time()]
    contender = Lease(spark, table, clock=lambda: now[0])
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "acquired"
        now[0] = time.time()
        with pytest.raises(IngestError, match="host another-host"):
            contender.acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    last = lease_holder(spark, table)
    assert last is not None
    assert last.host == "another-host"
    now[0] = last.expires - 0.5
    with pytest.raises(IngestError, match="already being ingested"):
        contender.acquire()  # killed, but its lease has not expired yet
    now[0] = last.expires
    won = contender.acquire()  # the moment the dead holder's lease runs out, the table is free
    assert won.pid == os.getpid()
    assert won.since == last.expires
    assert lease_holder(spark, table) == won
