"""Opt-in: order events beside the user events on one stream, a field producers add mid-run, and the truth per table.

Both are off by default (:class:`~icestream.synthetic.generator.GeneratorConfig` ``order_rate`` 0 and
``new_field_after`` None), so every existing run sends the same bytes and keeps its run id.

**Order events** (``order_rate`` per second, a Poisson stream in event time, merged in send order with
the user records)::

    {"event_id": "…", "event_type": "order", "order_id": "o-3f9a01c2", "user_id": "u-00042",
     "amount": 23.5, "currency": "EUR", "status": "created", "event_ts": "2026-11-25T14:00:00.123Z"}

Half of them create an order (``status`` ``created``); the other half move a recent open order on to
``paid``, ``shipped`` or ``cancelled``, with the order's amount and currency, so an ``order_id`` repeats
and ``event_id`` stays the unique key. They are clean: never duplicated, late or malformed. They go to
the ``orders`` table when the ingest routes on ``event_type`` (value ``order``); the user events, and
every other value, to the ``events`` table (``icestream ingest --route event_type --route-map order=orders``,
docs/ingest.md "Routing"). Without a route they stay in the events table with their extra fields in
``properties``.

**A new field** (``new_field_after`` seconds after the window start, time T): from T on, in event time,
every user event (and its duplicate: the same bytes) carries a top-level ``app_version``, the version
its device runs (also in ``device_info``), as producers do when they promote a field. Events before T,
malformed records and order events do not have it.

**Truth per table** (:func:`tables_truth`): for each table kind, the run's rows it must hold, once
each: their count, a checksum of their ids that a reader can recompute over the table
(:func:`id_checksum`), and how many rows carry the new field; written one JSON line per table next to
the anomalies' ground truth (:func:`tables_truth_path`).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icestream.errors import ConfigError
from icestream.synthetic.wire import Record, encode_event, format_ts, uuid4_text

if TYPE_CHECKING:
    from icestream.config import Settings

ORDER_EVENT_TYPE = "order"  # the event_type of order events: the value a router sends to the orders table
ORDER_STATUSES = ("created", "paid", "shipped", "cancelled")
ORDER_CURRENCIES = ("EUR", "USD", "GBP")
NEW_FIELD = "app_version"  # the top-level field that appears at time T
TABLE_KINDS = ("events", "orders")
TABLES_TRUTH_FILE = "tables_truth.jsonl"
_OPEN_ORDERS_KEPT = 200  # recent orders an update may pick from


def check_second_kind(order_rate: float, new_field_after: float | None) -> None:
    """Check the two options.

    Raises:
        ConfigError: If ``order_rate`` is negative or ``new_field_after`` is negative.
    """
    if not order_rate >= 0:
        raise ConfigError(f"order_rate: {order_rate} must be 0 (off) or a positive number of orders per second.")
    if new_field_after is not None and not new_field_after >= 0:
        raise ConfigError(f"new_field_after: {new_field_after} must be seconds after the window start, 0 or more.")


def table_of(record: Record) -> str | None:
    """The table kind a record's row belongs to (``events`` or ``orders``); None for what lands in no table.

    Duplicates and malformed records are None: a duplicate is the same row as its event, a malformed
    record goes to the shared rejects table.
    """
    if record.kind == "order":
        return "orders"
    return "events" if record.kind == "event" else None


def id_checksum(event_ids: Iterable[str]) -> int:
    """An order-free checksum of ids: the sum of each id's 8-byte BLAKE2b digest, modulo 2**64.

    The same ids, each once, give the same number in any order; a lost or doubled row changes it.
    """
    total = 0
    for event_id in event_ids:
        total += int.from_bytes(hashlib.blake2b(event_id.encode(), digest_size=8).digest(), "big")
    return total % 2**64


def order_records(seed_text: str, start: float, limit: float, rate: float, users: int) -> Iterator[Record]:
    """Order events from ``start`` until ``limit`` (epoch seconds, may be infinite), in event-time order.

    Args:
        seed_text: The generator's seed text (its own random stream, so user events stay as they are).
        start: First possible event time.
        limit: Event times are before this.
        rate: Order events per second.
        users: Users to draw from (the generator's ``u-NNNNN`` ids).
    """
    rng = random.Random(f"icestream-orders:{seed_text}")  # noqa: S311 - test data, not security
    open_orders: list[tuple[str, str, float, str]] = []  # order_id, user_id, amount, currency
    ts = start + rng.expovariate(rate)
    while ts < limit:
        if open_orders and rng.random() < 0.5:
            order_id, user_id, amount, currency = open_orders.pop(rng.randrange(len(open_orders)))
            status = rng.choices(ORDER_STATUSES[1:], weights=(6, 3, 1))[0]
            if status == "paid":  # a paid order can still ship
                open_orders.append((order_id, user_id, amount, currency))
        else:
            order_id, user_id = f"o-{rng.getrandbits(32):08x}", f"u-{rng.randrange(users):05d}"
            amount, currency, status = round(rng.lognormvariate(3.3, 0.8), 2), rng.choice(ORDER_CURRENCIES), "created"
            open_orders.append((order_id, user_id, amount, currency))
            del open_orders[:-_OPEN_ORDERS_KEPT]
        event_id = uuid4_text(rng.getrandbits(128))
        event = {
            "event_id": event_id,
            "event_type": ORDER_EVENT_TYPE,
            "order_id": order_id,
            "user_id": user_id,
            "amount": amount,
            "currency": currency,
            "status": status,
            "event_ts": format_ts(ts),
        }
        yield Record(encode_event(event), user_id, "order", ts, ts, ORDER_EVENT_TYPE, event_id)
        ts += rng.expovariate(rate)


def with_new_field(record: Record, since: float) -> Record:
    """The record with the new top-level field, if it is a user event (or its duplicate) at or after ``since``."""
    if record.kind not in ("event", "duplicate") or record.event_ts < since:
        return record
    event = json.loads(record.data)
    event[NEW_FIELD] = event["device_info"]["app_version"]
    return record._replace(data=encode_event(event))


def mix_second_kind(
    user_records: Iterable[Record],
    orders: Iterator[Record] | None,
    new_field_since: float | None,
    window_end: Callable[[], float],
) -> Iterator[Record]:
    """The user records with the new field from ``new_field_since`` on, and the orders merged in send order.

    Args:
        user_records: The generator's records, in send order.
        orders: Order events in event-time (= send) order, or None.
        new_field_since: Time T (epoch seconds), or None for no new field.
        window_end: The window's end once the user records are spent (an open window ends where they ran
            out); orders after it are not sent.
    """
    orders = iter(orders if orders is not None else ())
    pending = next(orders, None)
    for record in user_records:
        while pending is not None and pending.send_at <= record.send_at:
            yield pending
            pending = next(orders, None)
        yield record if new_field_since is None else with_new_field(record, new_field_since)
    end = window_end()
    while pending is not None and pending.event_ts < end:
        yield pending
        pending = next(orders, None)


@dataclass(frozen=True)
class TableTruth:
    """What one table must hold of a run, each row once (one JSON line of the truth file).

    Attributes:
        table: ``events`` or ``orders``.
        route_value: The ``event_type`` that routes to it (None: the default table, every other value).
        rows: Rows of the run it must hold (duplicates removed).
        id_checksum: :func:`id_checksum` of those rows' ``event_id``.
        new_field: The field that appears at T, or None when the run has no schema change.
        new_field_from: T as an ISO UTC timestamp (event time), or None.
        rows_with_new_field: Rows that carry it (every user event at or after T).
        run_id: The production run.
    """

    table: str
    route_value: str | None
    rows: int
    id_checksum: int
    new_field: str | None
    new_field_from: str | None
    rows_with_new_field: int
    run_id: str


class TableTally:
    """Counts, per table kind, the rows the records yielded so far must become (fed one record at a time)."""

    def __init__(self, run_id: str, new_field_since: float | None) -> None:
        self.run_id = run_id
        self.new_field_since = new_field_since
        self._rows = dict.fromkeys(TABLE_KINDS, 0)
        self._checksums = dict.fromkeys(TABLE_KINDS, 0)
        self._with_field = dict.fromkeys(TABLE_KINDS, 0)

    def add(self, record: Record) -> None:
        """Count one yielded record."""
        table = table_of(record)
        if table is None:
            return
        self._rows[table] += 1
        self._checksums[table] = (self._checksums[table] + id_checksum([record.event_id or ""])) % 2**64
        since = self.new_field_since
        self._with_field[table] += table == "events" and since is not None and record.event_ts >= since

    def truths(self) -> list[TableTruth]:
        """One :class:`TableTruth` per table kind."""
        since = self.new_field_since
        return [
            TableTruth(
                table,
                ORDER_EVENT_TYPE if table == "orders" else None,
                self._rows[table],
                self._checksums[table],
                NEW_FIELD if since is not None else None,
                format_ts(since) if since is not None else None,
                self._with_field[table],
                self.run_id,
            )
            for table in TABLE_KINDS
        ]


def tables_truth_path(settings: Settings) -> Path:
    """Where the truth per table is written: ``<run_dir>/tables_truth.jsonl``."""
    return settings.path("run_dir") / TABLES_TRUTH_FILE


def write_tables_truth(truths: Iterable[TableTruth], path: Path, append: bool = False) -> Path:
    """Write the truth per table as JSON lines (fields of :class:`TableTruth`).

    Returns:
        ``path``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as out:
        for truth in truths:
            out.write(json.dumps(asdict(truth)) + "\n")
    return path


def read_tables_truth(path: Path) -> list[TableTruth]:
    """Read what :func:`write_tables_truth` wrote (empty when the file is absent)."""
    if not path.is_file():
        return []
    return [TableTruth(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def as_options(order_rate: float | None, new_field_after: float | None) -> dict[str, Any]:
    """The :class:`~icestream.synthetic.generator.GeneratorConfig` options for the two switches (unset: none)."""
    options: dict[str, Any] = {}
    if order_rate:
        options["order_rate"] = order_rate
    if new_field_after is not None:
        options["new_field_after"] = new_field_after
    return options
