"""SIGKILL campaign on a routed stream of three tables whose payloads gain a field mid-run.

The producer sends three record kinds (``click``, ``view``, ``order``) on one stream, routed by
``event_type`` into ``<table>_click``, ``<table>_view`` and ``<table>_order``, with malformed
records and resends among them. Orders carry ``amount`` (a number) from the start; from moment T on
(after the first trial) every event carries a new field ``coupon``, and every eleventh order an
``amount`` that is a string, which its double column cannot hold. The ingest runs with
``schema_evolution: add-columns`` as its own process and is SIGKILLed at every phase of a batch,
``between_tables`` included. A final drain, and then DuckDB (not Spark) reads every table: each
event exactly once in its kind's table, ``coupon`` filled on every event sent after T and on none
before, every malformed record and every string amount exactly once in the rejects table.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from icestream.ingest.options import PHASES
from icestream.ingest.schema_evolution import CONFLICT
from icestream.lake.table import LakeTable
from icestream.queries import duckdb_engine as duck
from tests.helpers.ingest import drain, refresh_tables
from tests.reliability import figures
from tests.reliability.figures import size
from tests.reliability.ingest_runner import sigkill_trial
from tests.reliability.workload import Workload, order_violations

KINDS = ("click", "view", "order")
ROUTED_PHASES = (*PHASES, "between_tables")
BOUNDED_PHASES = ("between_commits", "between_tables", "after_commit")


class Shapes:
    """Gives each event its kind and, from T on, the new field; remembers what each event carried."""

    def __init__(self) -> None:
        self.after_t = False
        self.sent: dict[str, dict[str, Any]] = {}

    def __call__(self, number: int, document: dict[str, Any]) -> dict[str, Any]:
        kind = KINDS[number % 3]
        document = {**document, "event_type": kind}
        if kind == "order":
            document["amount"] = "n/a" if self.after_t and number % 11 == 2 else round(number * 1.25, 2)
        if self.after_t:
            document["coupon"] = f"C{number}"
        self.sent[document["event_id"]] = {"kind": kind, "coupon": document.get("coupon"),
                                           "amount": document.get("amount")}  # fmt: skip
        return document


def scan(spark, table: str, columns: str) -> list[tuple]:
    """``columns`` of every row of ``table``, read by DuckDB from the table's current metadata."""
    location, _ = LakeTable(spark, table).inspect.metadata_location()
    connection = duck.connect()
    try:
        return connection.execute(f"SELECT {columns} FROM iceberg_scan('{location}')").fetchall()
    finally:
        connection.close()


def test_sigkill_campaign_on_three_routed_tables_with_a_new_field_mid_run(spark, fresh, tmp_path: Path, monkeypatch):
    settings = fresh(shards=2, prefix="crashrt")
    monkeypatch.setenv("ICESTREAM_ROUTE", "event_type")
    monkeypatch.setenv("ICESTREAM_SCHEMA_EVOLUTION", "add-columns")
    seed = int(os.environ.get("RELIABILITY_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    # Bounded: a kill at each phase where one table's commit can part from another's (the events' commits,
    # between two routed tables, after them all); a kill before a batch commits anything is the plain
    # campaign's. Full: three rounds of every phase, every other trial of the later rounds at a random moment.
    phases = ROUTED_PHASES if figures.FULL else BOUNDED_PHASES
    targets = size(len(phases), 3 * len(phases))
    shapes = Shapes()
    workload = Workload(settings, shape=shapes).start(per_call=12, interval=0.3)
    phases_hit: set[str] = set()
    try:
        for number in range(targets):
            if number == 1:
                with workload._lock:  # from the next record on, the new field (T)
                    shapes.after_t = True
            phase = phases[number % len(phases)]
            random_moment = number >= len(phases) and number % 2 == 1
            code, last = sigkill_trial(
                settings, tmp_path, number, None if random_moment else phase, rng.randint(1, size(2, 3)),
                rng.uniform(4.0, 25.0) if random_moment else 150.0,
            )  # fmt: skip
            log_tail = (tmp_path / f"trial-{number:02d}.log").read_text(errors="replace")[-2000:]
            assert code == -signal.SIGKILL, f"trial {number} ended with {code}, not SIGKILL:\n{log_tail}"
            if last in ROUTED_PHASES:
                phases_hit.add(last)
    finally:
        workload.stop()

    tables = {kind: settings.companion_table_name(kind) for kind in KINDS}
    refresh_tables(spark, settings, *(name for name in tables.values() if spark.catalog.tableExists(name)))
    drain(spark, settings, routing="event_type", schema_evolution="add-columns", progress_file=tmp_path / "p.jsonl")

    ledger, sent = workload.ledger, shapes.sent
    conflicting = {event_id for event_id, shape in sent.items() if isinstance(shape["amount"], str)}
    lost = duplicated = misplaced = coupon_wrong = 0
    for kind, table in tables.items():
        rows = scan(spark, table, "event_id, coupon")
        found = Counter(event_id for event_id, _ in rows)
        expected = {event_id for event_id in ledger.good if sent[event_id]["kind"] == kind} - conflicting
        lost += len(expected - set(found))
        duplicated += sum(count - 1 for count in found.values())
        misplaced += len(set(found) - expected)
        coupon_wrong += sum(coupon != sent[event_id]["coupon"] for event_id, coupon in rows)
        spark.catalog.refreshTable(table)
        order_rows = spark.table(table).select("event_id", "user_id", "properties", "ingest_ts", "shard_id",
                                               "sequence_number").collect()  # fmt: skip
        assert order_violations(order_rows) == 0, f"order per key broken in {table}"
    assert scan(spark, settings.table_name, "count(*)") == [(0,)], "every kind has a table of its own"
    rejects = scan(spark, settings.rejects_table_name, "shard_id, sequence_number, reason")
    malformed = Counter((shard, sequence) for shard, sequence, reason in rejects if reason != CONFLICT)
    conflicts = Counter((shard, sequence) for shard, sequence, reason in rejects if reason == CONFLICT)
    after_t = sum(shape["coupon"] is not None for shape in sent.values())

    figures.record(
        "crash: routed + schema change", f"SIGKILL, seed {seed}", trials=targets, events=len(ledger.good),
        sent_after_t=after_t, lost=lost, duplicated=duplicated, misplaced=misplaced, coupon_wrong=coupon_wrong,
        conflicts=sum(conflicts.values()), rejects_lost=len(ledger.malformed - set(malformed)),
    )  # fmt: skip
    assert after_t > 0, "no event was sent after T: the schema change was not exercised"
    assert (lost, duplicated, misplaced, coupon_wrong) == (0, 0, 0, 0)
    assert set(malformed) == ledger.malformed
    assert max(malformed.values()) == 1
    assert sum(conflicts.values()) == len(conflicting & set(ledger.good)), "each string amount rejected once"
    assert not conflicts or max(conflicts.values()) == 1
    assert scan(spark, tables["order"], "typeof(amount)")[0] == ("DOUBLE",)
    assert phases_hit == set(phases), f"phases hit: {sorted(phases_hit)}"
