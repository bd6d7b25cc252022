"""What a run of the producer did: every record taken is counted as sent, failed, unsendable or unsent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class FailedRecord:
    """A record that was not sent, and why."""

    kind: str
    partition_key: str
    event_id: str | None
    size: int
    error_code: str
    error_message: str


@dataclass
class ProduceSummary:
    """What a run of the producer did. ``records == sent + failed + unsendable + unsent`` always.

    Attributes:
        records: Records taken from the input.
        sent: Records Kinesis accepted.
        retried: Record sends repeated after a failure (one record retried twice counts 2).
        throttled: Record sends Kinesis refused with ``ProvisionedThroughputExceededException``
            (the shard's write limit; each was retried, so they are also in ``retried``).
        failed: Records still failing after the last attempt (see ``failures``).
        unsendable: Records above the 1 MiB record limit, never sent (see ``failures``).
        unsent: Records taken but not sent because a stop request or the duration ended the run while
            they waited for their time (at most the one in hand; 0 when the input ran to its end).
        bytes_sent: Payload plus partition-key bytes accepted.
        calls: PutRecords calls made.
        seconds: Wall time, from the first record taken to the last call answered.
        stopped_early: True when a duration or a stop request ended the run before the input did.
        sent_by_kind: Records accepted, by record kind.
        failures: Every failed and unsendable record.
    """

    records: int = 0
    sent: int = 0
    retried: int = 0
    throttled: int = 0
    failed: int = 0
    unsendable: int = 0
    unsent: int = 0
    bytes_sent: int = 0
    calls: int = 0
    seconds: float = 0.0
    stopped_early: bool = False
    sent_by_kind: dict[str, int] = field(default_factory=dict)
    failures: list[FailedRecord] = field(default_factory=list)

    @property
    def records_per_second(self) -> float:
        """Records accepted per second of wall time."""
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready values (failures listed at most 100, with the full count kept)."""
        values = asdict(self)
        values["records_per_second"] = round(self.records_per_second, 1)
        values["seconds"] = round(self.seconds, 3)
        values["failures"] = values["failures"][:100]
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> ProduceSummary:
        """Read back what :meth:`as_dict` wrote (the failures as far as it listed them)."""
        names = {item.name for item in fields(cls)} - {"failures"}
        failures = [FailedRecord(**failure) for failure in values.get("failures", [])]
        return cls(**{name: values[name] for name in names if name in values}, failures=failures)

    def table(self) -> dict[str, float | int]:
        """The headline numbers (for a one-row table)."""
        return {
            "records": self.records,
            "sent": self.sent,
            "retried": self.retried,
            "throttled": self.throttled,
            "failed": self.failed,
            "unsendable": self.unsendable,
            "unsent": self.unsent,
            "MiB": round(self.bytes_sent / 2**20, 2),
            "calls": self.calls,
            "seconds": round(self.seconds, 1),
            "records/s": round(self.records_per_second),  # whole records: a rate of 5967.0 reads as a float count
        }

    def line(self) -> str:
        """One line for people: what was taken and where each record went, size, time and rate."""
        unsent = f", unsent {self.unsent} (stopped)" if self.unsent else ""
        return (
            f"{self.records} records: sent {self.sent}, failed {self.failed}, unsendable {self.unsendable}{unsent}"
            f" (retried {self.retried}, throttled {self.throttled});"
            f" {self.bytes_sent / 2**20:.2f} MiB in {self.seconds:.1f} s,"
            f" {self.records_per_second:.0f} records/s"
        )
