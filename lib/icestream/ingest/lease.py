"""Fencing: at most one ingest per table, through a lease recorded in the table's properties.

A second ingest started beside a live one (a scheduler's retry, a second terminal) would read the
same shards and race the first one's commits. So an ingest takes a lease on its table before it
reads anything: the table property ``icestream.lease`` names the holder (a random lease id, host,
pid, since) and when the lease expires. It is written with a compare-and-set commit of the table's
metadata (``TableOperations.commit(base, updated)`` fails if anyone committed since ``base`` was
read), so of two acquirers racing for a free lease exactly one wins; the other re-reads, finds
the winner's live lease and is refused with one line naming it.

The holder renews the lease while it runs (:meth:`Lease.renew`, called each batch, commits once a
quarter of the lease has passed) and removes it when it stops (:meth:`Lease.release`). A holder
that dies without releasing (SIGKILL, a lost machine) stops renewing: its lease expires after
``ttl_seconds`` and the next acquirer takes it. On the same machine a dead holder is noticed at
once: when the recorded host and pid namespace are this process's and that pid no longer runs
(or is a zombie), the lease is free. Clocks of different hosts are compared when a lease expires,
so keep them in sync (NTP) and ``ttl_seconds`` well above any skew and any batch's duration.

The commit is as safe as the catalog's: with the JDBC or Glue catalog across processes, with the
Hadoop catalog within one process only (see :mod:`icestream.runtime.catalog`).

Use::

    lease = Lease(spark, settings.table_name)
    lease.acquire()          # at start: IngestError if another live ingest holds the table
    ...; lease.renew()       # each batch: IngestError if the lease was lost meanwhile
    lease.release()          # at stop
"""

from __future__ import annotations

import json
import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from icestream.errors import IngestError
from icestream.lake.ddl import checked_table_name
from icestream.lake.inspect import load_iceberg_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LEASE_PROPERTY = "icestream.lease"
DEFAULT_TTL_SECONDS = 120.0
RENEW_FRACTION = 0.25  # renew() commits once this share of the lease has passed since the last commit
COMMIT_ATTEMPTS = 20  # compare-and-set attempts while other writers keep committing to the table


def _when(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class Identity:
    """Where a process runs: enough to tell, on the same machine, whether it still runs."""

    host: str
    pid: int
    pid_namespace: str  # e.g. ``pid:[4026531836]``; a pid means nothing outside its namespace

    @classmethod
    def current(cls) -> Identity:
        """This process's identity."""
        try:
            namespace = os.readlink("/proc/self/ns/pid")
        except OSError:  # not Linux: no namespace to compare, so pids are never trusted
            namespace = ""
        return cls(socket.gethostname(), os.getpid(), namespace)


def _process_gone(identity: Identity) -> bool:
    """True only when ``identity`` is a process of this machine and pid namespace that no longer runs."""
    here = Identity.current()
    if not identity.pid_namespace or (identity.host, identity.pid_namespace) != (here.host, here.pid_namespace):
        return False  # another machine or container: only expiry can tell
    if identity.pid == here.pid:
        return False
    try:
        os.kill(identity.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: it runs
        return False
    try:  # a SIGKILLed child its parent has not reaped yet still answers kill(pid, 0)
        with open(f"/proc/{identity.pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


@dataclass(frozen=True)
class Holder:
    """A lease as recorded in the table property: who holds it, since when, until when (epoch seconds)."""

    lease_id: str
    host: str
    pid: int
    pid_namespace: str
    since: float
    expires: float

    def to_property(self) -> str:
        """The property value (compact JSON)."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_property(cls, value: str | None) -> Holder | None:
        """Parse a property value; None when absent or not a lease this module wrote."""
        if not value:
            return None
        try:
            fields = json.loads(value)
            return cls(
                str(fields["lease_id"]),
                str(fields["host"]),
                int(fields["pid"]),
                str(fields["pid_namespace"]),
                float(fields["since"]),
                float(fields["expires"]),
            )
        except (ValueError, TypeError, KeyError):
            return None  # edited by hand beyond recognition: it fences nobody

    def live(self, now: float) -> bool:
        """True while the lease has not expired and its holder is not known to be gone."""
        return now < self.expires and not _process_gone(Identity(self.host, self.pid, self.pid_namespace))

    def describe(self) -> str:
        """``host H, pid P, since T``."""
        return f"host {self.host}, pid {self.pid}, since {_when(self.since)}"


def _java_exception(error: Exception) -> str:
    java = getattr(error, "java_exception", None)
    return "" if java is None else str(java.getClass().getName())


def lease_holder(spark: SparkSession, table: str) -> Holder | None:
    """Who holds the table's lease now, live or expired (None: nobody).

    Args:
        spark: The session.
        table: ``catalog.namespace.table``.
    """
    return Holder.from_property(load_iceberg_table(spark, checked_table_name(table)).properties().get(LEASE_PROPERTY))


class Lease:
    """The lease of one process on one table: acquire at start, renew each batch, release at stop."""

    def __init__(
        self,
        spark: SparkSession,
        table: str,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        identity: Identity | None = None,
        clock: Callable[[], float] = time.time,
        holder: tuple[str, str] = ("ingest", "ingested"),
    ) -> None:
        """Prepare a lease (nothing is recorded until :meth:`acquire`).

        Args:
            spark: The session whose catalog holds the table.
            table: ``catalog.namespace.table``.
            ttl_seconds: How long the lease outlives its last renewal; above the longest batch.
            identity: Who holds it (default: this process).
            clock: Epoch seconds (tests pass their own).
            holder: What holds it and what it does to the table, as a refusal names them
                (``("metrics refresh", "refreshed")`` for a metrics table).
        """
        if not ttl_seconds > 0:
            raise IngestError(f"lease ttl_seconds: {ttl_seconds} must be positive.")
        self.table = checked_table_name(table)
        self.ttl_seconds = float(ttl_seconds)
        self._spark = spark
        self._identity = identity or Identity.current()
        self._clock = clock
        self.holder = holder
        self._lease_id = os.urandom(8).hex()
        self._held: Holder | None = None
        self._committed_at = 0.0

    @property
    def held(self) -> Holder | None:
        """The lease as this process last recorded it, or None when not held."""
        return self._held

    def acquire(self) -> Holder:
        """Take the table's lease, or refuse when another live holder has it.

        Returns:
            The recorded lease.

        Raises:
            IngestError: One line naming the live holder (host, pid, since) and what to do.
        """

        def take(current: Holder | None) -> Holder:
            now = self._clock()
            if current is not None and current.lease_id != self._lease_id and current.live(now):
                raise IngestError(
                    f"{self.table} is already being {self.holder[1]} ({current.describe()}; lease valid until "
                    f"{_when(current.expires)} unless renewed). Stop that {self.holder[0]} first "
                    f"(`kill {current.pid}` on {current.host} stops it gracefully); if it is gone, start again "
                    f"after {_when(current.expires)}."
                )
            since = current.since if current is not None and current.lease_id == self._lease_id else now
            return self._record(since, now)

        return self._set(self._commit(take))

    def renew(self, force: bool = False) -> Holder:
        """Extend the lease; commits only once ``RENEW_FRACTION`` of it has passed (or when forced).

        Raises:
            IngestError: If the lease is not held, or was lost (expired and taken by another ingest):
                the caller must stop writing.
        """
        if self._held is None:
            raise IngestError(f"no lease held on {self.table}: call acquire() first.")
        if not force and self._clock() - self._committed_at < self.ttl_seconds * RENEW_FRACTION:
            return self._held

        def extend(current: Holder | None) -> Holder:
            if current is None or current.lease_id != self._lease_id:
                by = f"now held by {current.describe()}" if current is not None else "it was removed"
                raise IngestError(
                    f"this ingest lost its lease on {self.table} ({by}), so another ingest may be writing: "
                    "this one stops. Start it again once the other one has stopped."
                )
            return self._record(current.since, self._clock())

        return self._set(self._commit(extend))

    def release(self) -> bool:
        """Remove the lease if this process still holds it, so the table is free at once.

        Returns:
            True if a lease of this process was removed.
        """
        if self._held is None:
            return False
        removed = False

        def drop(current: Holder | None) -> Holder | None:
            nonlocal removed
            removed = current is not None and current.lease_id == self._lease_id
            return None if removed else current

        self._held = None
        self._commit(drop)
        return removed

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()

    def _record(self, since: float, now: float) -> Holder:
        who = self._identity
        return Holder(self._lease_id, who.host, who.pid, who.pid_namespace, since, now + self.ttl_seconds)

    def _set(self, holder: Holder | None) -> Holder:
        assert holder is not None  # take() and extend() always return a lease
        self._held = holder
        self._committed_at = self._clock()
        return holder

    def _commit(self, decide: Callable[[Holder | None], Holder | None]) -> Holder | None:
        """Read the lease, decide the new one, and compare-and-set it; re-read after a lost race.

        Raises:
            IngestError: From ``decide``; if the table does not exist; or after ``COMMIT_ATTEMPTS`` lost races.
        """
        from py4j.protocol import Py4JJavaError

        jvm: Any = self._spark._jvm
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                operations = load_iceberg_table(self._spark, self.table).operations()
            except Py4JJavaError as error:
                if _java_exception(error).endswith("NoSuchTableException"):
                    raise IngestError(f"{self.table} does not exist: create the tables first (00_setup).") from None
                raise
            base = operations.current()
            current = Holder.from_property(base.properties().get(LEASE_PROPERTY))
            wanted = decide(current)
            if wanted == current:
                return current
            builder = jvm.org.apache.iceberg.TableMetadata.buildFrom(base)
            if wanted is None:
                builder = builder.removeProperties({LEASE_PROPERTY})
            else:
                builder = builder.setProperties({LEASE_PROPERTY: wanted.to_property()})
            try:
                # Fails unless the table's current metadata is still `base`: the compare-and-set.
                operations.commit(base, builder.build())
                return wanted
            except Py4JJavaError as error:
                # Unknown state: the commit may have landed; the next read tells.
                if not _java_exception(error).endswith(("CommitFailedException", "CommitStateUnknownException")):
                    raise
            time.sleep(random.uniform(0.02, 0.1) * (attempt + 1))  # noqa: S311 - jitter, not security
        raise IngestError(
            f"could not record the lease on {self.table} in {COMMIT_ATTEMPTS} attempts: other processes commit to "
            "it continuously. Try again."
        )
