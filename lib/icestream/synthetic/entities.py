"""An entity stream: orders created, updated and deleted, sent with late, replayed and malformed changes.

The change data a CDC pipeline carries (:mod:`icestream.ingest.changes`), generated with its ground
truth. Each order has a ``version`` that grows by one with every change of that order (the
ordering column), and ``updated_at``, the change's time. A run of ``changes`` steps, seeded:

- a step creates an order (until ``orders`` exist), updates a live one (status, amount), deletes
  one (``delete_share``), or creates a deleted order again (a new version: a delete then a create
  is a create);
- a *late* change (``late_share``) is held back and sent a few records after newer changes of
  its order, as a producer retry or another shard would deliver it;
- a *replay* (``replay_share``) sends an earlier change's bytes again (an at-least-once producer);
- a *malformed* record (``malformed_share``) is not a change at all: bad JSON, no key, a wrong
  type, an unknown operation.

Shapes: ``flat`` (``{"op": "u", "order_id": 7, ...}``) or ``debezium`` (``before``/``after``/``op``/
``ts_ms``; a delete's ``before`` is the order as it was, so its version equals the last update's,
and the order rule's "a delete wins at the same order" decides).

The truth (:attr:`EntityStream.truth`) is the generator's own state at the end: each live order's
columns, and the deleted keys. :func:`apply_rule` derives the same state from the records in send
order by the documented rule, a check that needs neither Spark nor Iceberg.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

ORDER_COLUMNS = "order_id bigint, customer string, status string, amount double, version bigint, updated_at timestamp"
ORDER_KEY = "order_id"
ORDER_ORDER = "version"
STATUSES = ("created", "paid", "packed", "shipped", "delivered", "returned")
MALFORMED = (
    b"{not json",
    b'{"op": "u", "status": "paid", "version": 2}',
    b'{"op": "u", "order_id": "seven", "version": 2}',
    b'{"op": "merge", "order_id": 1, "version": 9}',
)
START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


@dataclass
class EntityStream:
    """The records to send (payload, partition key), in send order, and what the table must hold after them."""

    records: list[tuple[bytes, str]] = field(default_factory=list)
    truth: dict[int, dict[str, Any]] = field(default_factory=dict)  # live orders: order_id -> columns
    deleted: set[int] = field(default_factory=set)  # orders whose last change is a delete
    sent: Counter = field(default_factory=Counter)  # change, late, replay, malformed


def _text_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _payload(shape: str, op: str, row: dict[str, Any], before: dict[str, Any] | None) -> bytes:
    wire = {**row, "updated_at": _text_time(row["updated_at"])}
    if shape == "flat":
        return json.dumps({"op": op, **wire}).encode()
    old = None if before is None else {**before, "updated_at": _text_time(before["updated_at"])}
    envelope = {
        "before": old if op != "c" else None,
        "after": None if op == "d" else wire,
        "op": op,
        "ts_ms": int(row["updated_at"].timestamp() * 1000),
        "source": {"connector": "icestream-synthetic"},
    }
    return json.dumps(envelope).encode()


def order_changes(
    orders: int = 40,
    changes: int = 400,
    seed: int = 7,
    shape: str = "flat",
    delete_share: float = 0.08,
    late_share: float = 0.05,
    replay_share: float = 0.05,
    malformed_share: float = 0.01,
    start: datetime = START,
) -> EntityStream:
    """Generate an entity stream of order changes and its truth (see the module docstring)."""
    rng = random.Random(seed)  # noqa: S311 - seeded test data, not cryptography
    stream = EntityStream()
    state: dict[int, dict[str, Any]] = {}  # every order ever made: its latest row
    held: list[tuple[int, bytes, str]] = []  # late changes: (send after this many more records, payload, key)
    sent_changes: list[tuple[bytes, str]] = []

    def send(payload: bytes, key: str, kind: str) -> None:
        stream.records.append((payload, key))
        stream.sent[kind] += 1
        for item in list(held):
            held.remove(item)
            if item[0] <= 1:
                stream.records.append(item[1:])
                stream.sent["late"] += 1
            else:
                held.append((item[0] - 1, *item[1:]))

    for step in range(changes):
        moment = start + timedelta(seconds=step)
        roll = rng.random()
        if roll < malformed_share:
            send(rng.choice(MALFORMED), "malformed", "malformed")
            continue
        if roll < malformed_share + replay_share and sent_changes:
            send(*rng.choice(sent_changes), "replay")
            continue
        live = [key for key, row in state.items() if key not in stream.deleted]
        if len(state) < orders and (not live or rng.random() < 0.3):
            key = len(state) + 1
            row = {
                "order_id": key,
                "customer": f"c-{rng.randrange(1000):04d}",
                "status": "created",
                "amount": round(rng.uniform(5, 500), 2),
                "version": 1,
                "updated_at": moment,
            }
            op, before = "c", None
        elif stream.deleted and (not live or rng.random() < 0.05):  # every order deleted: one comes back
            key = rng.choice(sorted(stream.deleted))
            before = state[key]
            row = {**before, "status": "created", "version": before["version"] + 1, "updated_at": moment}
            op = "c"
            stream.deleted.discard(key)
        else:
            key = rng.choice(live)
            before = state[key]
            if rng.random() < delete_share:
                op = "d"
                version = before["version"] if shape == "debezium" else before["version"] + 1
                row = {**before, "version": version, "updated_at": moment}
                stream.deleted.add(key)
            else:
                op = "u"
                row = {
                    **before,
                    "status": rng.choice(STATUSES[1:]),
                    "amount": round(before["amount"] * 1.1, 2),
                    "version": before["version"] + 1,
                    "updated_at": moment,
                }
        state[key] = row
        payload = _payload(shape, op, row, before)
        sent_changes.append((payload, str(key)))
        if rng.random() < late_share:
            held.append((rng.randint(2, 8), payload, str(key)))
        else:
            send(payload, str(key), "change")
    for _, payload, held_key in held:
        stream.records.append((payload, held_key))
        stream.sent["late"] += 1
    stream.truth = {key: row for key, row in state.items() if key not in stream.deleted}
    return stream


def apply_rule(records: list[tuple[bytes, str]], shape: str = "flat") -> dict[int, dict[str, Any]]:
    """The live orders after ``records`` in send order, by the order rule (newer version wins; at the same
    version a delete wins; else the later arrival): the truth derived without Spark or Iceberg.

    Timestamps come back as aware datetimes; malformed records are skipped.
    """
    held: dict[int, tuple[int, bool, dict[str, Any]]] = {}  # order -> (version, deleted, row)
    for payload, _ in records:
        try:
            document = json.loads(payload)
        except ValueError:
            continue
        op = document.get("op")
        if shape == "debezium":
            document = document.get("before" if op == "d" else "after") or {}
        if op not in ("c", "u", "d") or type(document.get("order_id")) is not int:
            continue
        key, version, deleted = document["order_id"], document["version"], op == "d"
        if key in held:
            old_version, old_deleted, _ = held[key]
            if version < old_version or (version == old_version and old_deleted and not deleted):
                continue
        row = {name: document.get(name) for name in ("order_id", "customer", "status", "amount", "version")}
        row["updated_at"] = datetime.fromisoformat(document["updated_at"].replace("Z", "+00:00"))
        held[key] = (version, deleted, row)
    return {key: row for key, (_, deleted, row) in held.items() if not deleted}
