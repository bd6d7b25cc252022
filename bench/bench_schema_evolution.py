"""The cost of a column add: the ingest batch that adds a column against its neighbours, in one run.

One stream is filled once with equal batches of clean events (``--batch-records``, spread evenly
over the shards, so that with ``max_records_per_shard`` = batch / shards every batch of the ingest
reads exactly one of them): ``--warmup-batches`` batches, then per repetition ``--before``
batches, the *adding* batch, where every event carries a new top-level string field
(``coupon_1``, ``coupon_2``, ...: a different name per repetition, so each repetition adds a
column), and ``--after`` batches that carry it too. Fields accumulate: repetition 2's events carry
``coupon_1`` from its first batch on, so its neighbours bring a field that is a column already.

The whole stream is drained, one query per table (a long-running ingest: no restart between the
repetitions), into fresh tables in turn: first a throwaway drain (``add-columns``: the JVM's JIT,
Python workers, the read, DDL and commit paths warm up; batches keep getting faster for a minute or
two), then ``off`` (the new fields stay in ``properties``), ``add-columns`` (the adding batch runs
``ALTER TABLE ... ADD COLUMNS`` before its commits), ``add-columns`` and ``off`` again: the
baseline with the same payloads in the same session, in an ABBA order so that a steady drift of the
machine or the JIT falls on both modes alike. Each drain's first ``--warmup-batches`` batches (its
first loads the dedupe index) are not counted. Not a query per repetition: a query resumes from the
older of its tables' committed positions, and the rejects table of a clean stream commits positions
only every ``position_commit_seconds`` (30 s), so a restarted query would read batches again.

Measured per batch: the ingest's own ``duration_ms`` (``total`` and its phases, ``evolve`` among
them: planning the new columns and their DDL; 0 for a batch with no new field). Reported: medians
over batches of the adding batch's total and its neighbours' (before and after) and their ratio;
each adding batch against the median of its own neighbours (same drain and repetition, so the drift
between drains falls out), paired, as a ratio and as seconds more; the adding and neighbouring
batches' ``evolve``; the same for the ``off`` drains (a control: the payload change alone) and for
the warm-up drain (the process's first column adds); and add-columns / off, the mean of each mode's
drain medians (ABBA), for the neighbours: the steady cost of the mode.

Run: ``.venv/bin/python bench/bench_schema_evolution.py [--reps 3] [--batch-records 2000]`` (about 3 minutes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, bench_session, command_line, new_table_settings, run_ingest, shown, summary, write_results

MODES = ("add-columns", "off")
DRAINS = ("off", "add-columns", "add-columns", "off")  # ABBA: a steady drift falls on both alike
PHASES = ("plan", "read", "parse", "dedupe", "evolve", "write_rejects", "write_events", "total")


def field_name(rep: int) -> str:
    """The top-level field repetition ``rep`` (1-based) adds."""
    return f"coupon_{rep}"


def shard_keys(settings: Any) -> list[str]:
    """One partition key per shard, in shard order (Kinesis maps a key's MD5 into a shard's hash range)."""
    from icestream.kinesis.clients import kinesis_client, list_shards

    ranges = [
        (int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"]))
        for shard in list_shards(kinesis_client(settings), settings.stream_name)
    ]
    keys: list[str | None] = [None] * len(ranges)
    number = 0
    while None in keys:
        key = f"k{number}"
        digest = int(hashlib.md5(key.encode()).hexdigest(), 16)  # noqa: S324 - Kinesis's hash, not security
        shard = next(index for index, (start, end) in enumerate(ranges) if start <= digest <= end)
        keys[shard] = keys[shard] or key
        number += 1
    return [key for key in keys if key is not None]


def layout(args: argparse.Namespace) -> list[tuple[int, str, list[str]]]:
    """Each batch of the stream, in order: its repetition (0: warm-up), its role and the fields its events carry."""
    batches: list[tuple[int, str, list[str]]] = [(0, "warm-up", [])] * args.warmup_batches
    for rep in range(1, args.reps + 1):
        before = [field_name(number) for number in range(1, rep)]
        batches += [(rep, "before", before)] * args.before
        batches += [(rep, "adding", [*before, field_name(rep)])]
        batches += [(rep, "after", [*before, field_name(rep)])] * args.after
    return batches


def fill(settings: Any, args: argparse.Namespace) -> list[tuple[int, str, list[str]]]:
    """Create the stream and send every batch's events, spread evenly over the shards; return the layout."""
    from icestream.kinesis.clients import ensure_stream
    from icestream.producer.put import produce
    from icestream.synthetic.generator import backfill_config, generate
    from icestream.synthetic.wire import encode_event

    ensure_stream(settings, shard_count=args.shards)
    keys = shard_keys(settings)
    fields = layout(args)
    config = backfill_config(
        hours=3, records=len(fields) * args.batch_records, seed=7,
        duplicate_rate=0.0, late_rate=0.0, bad_rate=0.0, extra_field_rate=0.0,
    )  # fmt: skip
    generated, _ = generate(config)
    records = []
    for number, record in enumerate(generated):
        extra = fields[number // args.batch_records][2]
        data = record.data
        if extra:
            data = encode_event(json.loads(data) | {name: f"C{number % 997}" for name in extra})
        # Round robin over one key per shard: each shard holds the same share of every batch, in order.
        records.append(record._replace(data=data, partition_key=keys[number % len(keys)]))
    sent = produce(settings, records, progress=False).sent
    if sent != len(records):
        raise SystemExit(f"the emulator accepted {sent} of {len(records)} records")
    return fields


def drain(spark: Any, target: Any, mode: str, batches: int, per_shard: int) -> list[dict[str, Any]]:
    """Run one query of ``batches`` batches into ``target`` with schema evolution ``mode``; their progress."""
    progress: list[dict[str, Any]] = []
    run_ingest(spark, target, max_batches=batches, max_records_per_shard=per_shard, schema_evolution=mode,
               on_progress=progress.append)  # fmt: skip
    return progress


def batches_shown(stats: dict[str, float], digits: int = 2, unit: str = " s", what: str = "batches") -> str:
    """:func:`common.shown` over batches: ``median 1.23 s (min 1.10, max 1.50, 9 batches)``."""
    return shown(stats, unit, digits).replace(" runs)", f" {what})")


def median(values: list[float]) -> float:
    """The median (nan for none)."""
    return statistics.median(values) if values else float("nan")


def measure(spark: Any, settings: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Fill the stream, drain it once per entry of ``("add-columns", *DRAINS)``; one row per counted batch.

    Drain 0 warms up the JVM's JIT, Python workers, the read, DDL and commit paths: its rows are
    kept with mode ``warm-up`` (its adding batches are the process's first column adds), not pooled.
    """
    fields = fill(settings, args)
    print(f"stream {settings.stream_name}: {len(fields)} batches of {args.batch_records} records "
          f"in {args.shards} shards", flush=True)  # fmt: skip
    batches: list[dict[str, Any]] = []
    for number, mode in enumerate(("add-columns", *DRAINS)):
        label = mode if number else "warm-up"
        target = new_table_settings(settings.stream_name, prefix="evo" if mode != "off" else "evoff")
        progress = drain(spark, target, mode, len(fields), args.batch_records // args.shards)
        sizes = [batch["num_input_rows"] for batch in progress]
        if sizes != [args.batch_records] * len(fields):
            raise SystemExit(f"{label}: batches of {sizes} records, expected {len(fields)} of {args.batch_records}")
        for (rep, role, extra), batch in zip(fields, progress, strict=True):
            if rep == 0:
                continue  # this drain's own warm-up batches
            adds = role == "adding" and mode != "off"
            expected = {target.table_name: f"{field_name(rep)} string"} if adds else {}
            if batch["schema_changes"] != expected:
                raise SystemExit(f"{label}, batch {batch['batch_id']} ({role} of repetition {rep}): "
                                 f"schema changes {batch['schema_changes']}, expected {expected}")  # fmt: skip
            batches.append({
                "drain": number, "mode": label, "rep": rep, "role": role, "fields": extra,
                "batch_id": batch["batch_id"], "written": batch["written"], "schema_changes": batch["schema_changes"],
                "duration_ms": {phase: batch["duration_ms"].get(phase, 0.0) for phase in PHASES},
            })  # fmt: skip
        for rep in range(1, args.reps + 1):
            mine = [b for b in batches if b["drain"] == number and b["rep"] == rep]
            adding = next(b for b in mine if b["role"] == "adding")["duration_ms"]
            neighbours = [b["duration_ms"]["total"] for b in mine if b["role"] != "adding"]
            print(f"  {label:<11} repetition {rep}: adding batch {adding['total']:5.0f} ms "
                  f"(evolve {adding['evolve']:4.0f} ms, write_events {adding['write_events']:4.0f} ms), "
                  f"neighbours median {median(neighbours):5.0f} ms", flush=True)  # fmt: skip
    return batches


KNOWN = "neighbours with known fields"
GROUPS = {  # which batches each figure is over
    "before": lambda b: b["role"] == "before",
    "adding": lambda b: b["role"] == "adding",
    "after": lambda b: b["role"] == "after",
    "neighbours": lambda b: b["role"] != "adding",
    # neighbours whose events carry a field that is a column already (evolution plans, runs no DDL)
    KNOWN: lambda b: b["role"] != "adding" and bool(b["fields"]),
}


def analyse(batches: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per mode and group, each adding batch against its own neighbours, the drift, the ratios."""
    seconds = {
        mode: {
            group: {phase: summary([b["duration_ms"][phase] / 1000 for b in batches if b["mode"] == mode and chosen(b)])
                    for phase in PHASES}
            for group, chosen in GROUPS.items()
        }
        for mode in (*MODES, "warm-up")
    }  # fmt: skip
    # Paired: each adding batch against the median of its own neighbours (same drain, same repetition).
    pairs: dict[str, list[dict[str, float]]] = {}
    for row in (b for b in batches if b["role"] == "adding"):
        own = median([b["duration_ms"]["total"] / 1000 for b in batches
                      if (b["drain"], b["rep"]) == (row["drain"], row["rep"]) and b["role"] != "adding"])  # fmt: skip
        total = row["duration_ms"]["total"] / 1000
        pairs.setdefault(row["mode"], []).append({"excess_s": total - own, "ratio": total / own})
    paired = {mode: {key: summary([pair[key] for pair in rows]) for key in ("excess_s", "ratio")}
              for mode, rows in pairs.items()}  # fmt: skip
    # Per drain, in order: the median total of its neighbours, of those with known fields, of its adding batches.
    keys = {"neighbours_s": "neighbours", "known_s": KNOWN, "adding_s": "adding"}
    drift = [
        {"mode": mode, **{key: median([b["duration_ms"]["total"] / 1000 for b in batches
                                       if b["drain"] == number and GROUPS[group](b)]) for key, group in keys.items()}}
        for number, mode in enumerate(("warm-up", *DRAINS))
    ]  # fmt: skip

    def across(key: str) -> float:
        """add-columns / off: the mean over each mode's drains of their medians (ABBA: a steady drift cancels)."""
        means = {mode: statistics.mean(entry[key] for entry in drift if entry["mode"] == mode) for mode in MODES}
        return round(means["add-columns"] / means["off"], 3)

    evo, off = seconds["add-columns"], seconds["off"]

    def ratio(top: dict[str, Any], bottom: dict[str, Any]) -> float:
        return round(top["total"]["median"] / bottom["total"]["median"], 3)

    ratios = {
        "adding_to_neighbours_add_columns": ratio(evo["adding"], evo["neighbours"]),
        "adding_to_before_add_columns": ratio(evo["adding"], evo["before"]),
        "adding_to_after_add_columns": ratio(evo["adding"], evo["after"]),
        "adding_to_neighbours_off": ratio(off["adding"], off["neighbours"]),
        "neighbours_add_columns_to_off": across("neighbours_s"),
        "known_fields_add_columns_to_off": across("known_s"),
        "adding_add_columns_to_off": across("adding_s"),
        **{f"paired_adding_to_own_neighbours_{mode}": round(paired[mode]["ratio"]["median"], 3) for mode in paired},
    }
    return {"seconds": seconds, "paired": paired, "drift": drift, "ratios": ratios}


def report(found: dict[str, Any], args: argparse.Namespace) -> None:
    """Print the medians and ratios of :func:`analyse`."""
    seconds, paired, ratios = found["seconds"], found["paired"], found["ratios"]
    evo = seconds["add-columns"]
    print(f"batches of {args.batch_records} records, {args.reps} repetitions (one column added in each), "
          f"{DRAINS.count('add-columns')} drains per mode; medians over batches:")  # fmt: skip
    for mode in MODES:
        for group in GROUPS:
            figures = seconds[mode][group]
            print(f"  {mode:<11} {group:<28} total {batches_shown(figures['total'])}, "
                  f"evolve {batches_shown(figures['evolve'], 3)}")  # fmt: skip
    print("phases, add-columns, adding batch / neighbours, s: " + ", ".join(
        f"{phase} {evo['adding'][phase]['median']:.3f} / {evo['neighbours'][phase]['median']:.3f}"
        for phase in PHASES))  # fmt: skip
    print(f"adding batch / neighbours: add-columns {ratios['adding_to_neighbours_add_columns']:.2f} "
          f"(/ before {ratios['adding_to_before_add_columns']:.2f}, "
          f"/ after {ratios['adding_to_after_add_columns']:.2f}); "
          f"off, the same payloads (control) {ratios['adding_to_neighbours_off']:.2f}")  # fmt: skip
    neighbours = args.before + args.after
    for mode in ("add-columns", "off", "warm-up"):
        print(f"paired, {mode}: each adding batch / the median of its own {neighbours} neighbours "
              f"{batches_shown(paired[mode]['ratio'], unit='', what='adds')}; adding - neighbours "
              f"{batches_shown(paired[mode]['excess_s'], 3, what='adds')}")  # fmt: skip
    print(f"add-columns / off (each mode's drain medians, averaged): "
          f"neighbours {ratios['neighbours_add_columns_to_off']:.2f} (those with known fields "
          f"{ratios['known_fields_add_columns_to_off']:.2f}), "
          f"adding batch {ratios['adding_add_columns_to_off']:.2f}")  # fmt: skip
    print("neighbours' median per drain, in order (the drift): "
          + ", ".join(f"{entry['mode']} {entry['neighbours_s']:.2f} s" for entry in found["drift"]))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-records", type=int, default=2_000, help="records per batch (a multiple of shards)")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3, help="repetitions, each adding one column")
    parser.add_argument("--before", type=int, default=5, help="neighbouring batches before the adding one")
    parser.add_argument("--after", type=int, default=5, help="neighbouring batches after the adding one")
    parser.add_argument("--warmup-batches", type=int, default=2, help="first batches of each drain, not counted")
    args = parser.parse_args()
    if args.batch_records % args.shards:
        parser.error("--batch-records must be a multiple of --shards")
    facts = banner("schema evolution: the batch that adds a column against its neighbours", command_line())
    with bench_session("schema_evolution", shards=args.shards) as (settings, spark):
        batches = measure(spark, settings, args)
    found = analyse(batches)
    report(found, args)
    write_results(
        "schema_evolution",
        {"machine": facts, "command": command_line(), "batch_records": args.batch_records, "shards": args.shards,
         "reps": args.reps, "before": args.before, "after": args.after, "warmup_batches": args.warmup_batches,
         "drains": ["warm-up (add-columns)", *DRAINS], **found, "batches": batches},
    )  # fmt: skip


if __name__ == "__main__":
    main()
