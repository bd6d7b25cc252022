"""A change stream sent and ingested into a keyed table, with its truth (notebook 06).

:func:`change_stream_demo` sends a generated entity stream of orders
(:func:`icestream.synthetic.entities.order_changes`: creates, updates, deletes, re-creates, late and replayed
changes, a few malformed records) to a stream of its own, ``<stream>-change-demo``, then runs the
change ingest over it once: the keyed table ``<table>_change_demo`` (merge-on-read) with its rejects
table ``<table>_change_demo_rejects``, one ``MERGE`` per batch. The tables are dropped and made again
on every run, so a second run reads as the first; only tables the demo made are dropped
(:mod:`icestream.lake.demo_tables`), and its names are not ``<table>_orders``, which a user's route
(``--route-map order=orders``, as notebook 05 shows) makes; the stream is deleted after the ingest. It runs on the local
emulator only (on AWS it would create and pay for a stream).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from icestream.config import CHANGE_DEMO_SUFFIX
from icestream.demos.routed_demo import start_afresh
from icestream.ingest.changes import ChangeSpec
from icestream.ingest.query import start_ingest
from icestream.lake.ddl import create_rejects_table
from icestream.lake.demo_tables import demo_mark
from icestream.lake.keyed import LIVE_FILTER, create_keyed_table
from icestream.lake.rowlevel import own_position_deletes
from icestream.lake.statement import Statement
from icestream.lake.summary import BATCH_KEY, POSITIONS_KEY
from icestream.lake.table import LakeTable
from icestream.producer.put import produce
from icestream.runtime.handles import first_row
from icestream.synthetic.entities import ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER, EntityStream, order_changes
from icestream.synthetic.wire import Record

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

    from icestream.config import Settings

DEMO_SUFFIX = CHANGE_DEMO_SUFFIX
COMPARED = ("customer", "status", "amount", "version", "updated_at")
# The snapshot-summary keys a batch's commit is read by.
BATCH_SUMMARY_KEYS = (BATCH_KEY, POSITIONS_KEY, "added-records", "added-position-deletes", "removed-position-deletes")


@dataclass(frozen=True)
class ChangeDemo:
    """What the demo sent and what its ingest did."""

    settings: Settings  # the demo's stream and tables (its table_name is the keyed table)
    spec: ChangeSpec
    stream: EntityStream  # the records sent, in order, and the truth
    progress: list[dict[str, Any]]  # the ingest's batches
    max_records_per_shard: int  # the ingest's batch size, several batches (several MERGEs) per run

    @property
    def command(self) -> str:
        """The ``icestream ingest`` command line the demo's ingest equals, its stream and table as ``ICESTREAM_*``."""
        environment = f"ICESTREAM_STREAM_NAME={self.settings.stream_name} ICESTREAM_TABLE={self.settings.table}"
        words = ["--available-now", "--trigger", "0", "--changes", ORDER_COLUMNS, "--key", ORDER_KEY, "--order"]
        words += [ORDER_ORDER, "--max-records-per-shard", str(self.max_records_per_shard)]
        return f"{environment} icestream ingest {shlex.join(words)}"

    def compare(self, spark: SparkSession) -> pd.DataFrame:
        """The keyed table against the truth: live orders, tombstones, orders that differ, rejects.

        Each read is a recorded :class:`~icestream.lake.statement.Statement` of its table.
        """
        import pandas as pd

        table = LakeTable(spark, self.settings.table_name)
        columns = ", ".join((ORDER_KEY, *COMPARED))
        live = table.run(Statement(f"SELECT {columns} FROM {table.name} WHERE {LIVE_FILTER}")).collect()
        held = {row[ORDER_KEY]: tuple(row[name] for name in COMPARED) for row in live}
        truth = {key: tuple(_naive(row[name]) for name in COMPARED) for key, row in self.stream.truth.items()}
        tombstones = table.run(Statement(f"SELECT {ORDER_KEY} FROM {table.name} WHERE NOT ({LIVE_FILTER})")).collect()
        rejects = LakeTable(spark, self.settings.rejects_table_name)
        rejected = first_row(rejects.run(Statement(f"SELECT count(*) AS n FROM {rejects.name}"))).n
        differ = sum(held.get(key) != row for key, row in truth.items()) + len(set(held) - set(truth))
        return pd.DataFrame(
            {
                "live orders": [len(held)],
                "live orders expected": [len(truth)],
                "orders that differ": [differ],
                "tombstones": [len(tombstones)],
                "deleted orders expected": [len(self.stream.deleted)],
                "rejects": [int(rejected)],
                "malformed records sent": [self.stream.sent["malformed"]],
            }
        ).T.rename(columns={0: self.settings.table_name})

    def batches(self, spark: SparkSession) -> pd.DataFrame:
        """Each batch of the ingest: what it read, and what its ``MERGE`` did to the table (:func:`batch_figures`)."""
        table = LakeTable(spark, self.settings.table_name)
        fields = ", ".join(f"summary['{key}'] AS `{key}`" for key in BATCH_SUMMARY_KEYS)
        rows = table.run(Statement(f"SELECT {fields} FROM {table.name}.snapshots ORDER BY committed_at")).collect()
        return batch_figures(self.progress, [row.asDict() for row in rows])


def batch_figures(progress: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> pd.DataFrame:
    """The ingest's batches beside their commits, in figures that add up.

    A batch's valid changes are folded to one per order, then one ``MERGE`` applies them: an order
    new to the table is a row inserted; an order already there (a delete too: it becomes a
    tombstone) has its row replaced, the old row's place going into a delete file (merge-on-read).
    So ``changes = orders inserted + orders changed + changes not applied`` (folded into a newer change
    of the same order in the batch, or older than the table's row), and the orders inserted add up to
    the table's rows. The orders changed are the commit's own position deletes: Iceberg's
    ``added-position-deletes`` also counts the earlier ones it carried over from rewritten delete files.

    Args:
        progress: The ingest's batches (``batch_id``, ``num_input_rows``, ``written``, ``rejected``, ``duration_ms``).
        summaries: The keyed table's snapshot summaries (the ingest's carry :data:`BATCH_KEY`); others are ignored.

    Returns:
        One row per batch: ``batch``, ``records read``, ``rejected``, ``changes``, ``orders inserted``,
        ``orders changed``, ``changes not applied``, ``positions committed``, ``seconds``.
    """
    import pandas as pd

    commits = {int(summary[BATCH_KEY]): summary for summary in summaries if summary.get(BATCH_KEY) is not None}
    rows = []
    for batch in progress:
        commit = commits.get(int(batch["batch_id"]), {})
        changed = own_position_deletes(commit)
        inserted = int(commit.get("added-records") or 0) - changed  # a replaced order's new row is written too
        rows.append(
            {
                "batch": int(batch["batch_id"]),
                "records read": int(batch["num_input_rows"]),
                "rejected": int(batch["rejected"]),
                "changes": int(batch["written"]),
                "orders inserted": inserted,
                "orders changed": changed,
                "changes not applied": int(batch["written"]) - inserted - changed,
                "positions committed": commit.get(POSITIONS_KEY) is not None,
                "seconds": batch["duration_ms"]["total"] / 1000,
            }
        )
    return pd.DataFrame(rows)


def _naive(value: Any) -> Any:
    """A timestamp as Spark returns it in a UTC session (naive UTC); anything else as it is."""
    return value.replace(tzinfo=None) if hasattr(value, "tzinfo") and value.tzinfo is not None else value


def demo_settings(settings: Settings) -> Settings:
    """The demo's stream ``<stream>-change-demo`` and keyed table ``<table>_change_demo``."""
    return replace(settings.companion(DEMO_SUFFIX), stream_name=f"{settings.stream_name}-change-demo")


def change_stream_demo(
    spark: SparkSession,
    settings: Settings,
    orders: int = 200,
    changes: int = 2_000,
    seed: int = 7,
    timeout: float = 600.0,
) -> ChangeDemo | None:
    """Send an entity stream of order changes to a new stream and ingest it into a keyed table.

    Args:
        spark: The session.
        settings: The workbook's settings (see :func:`demo_settings` for the demo's names).
        orders: Orders the stream creates.
        changes: Records to send, exactly: changes, with late (sent out of order), replayed and malformed
            ones among them.
        seed: The generator's seed.
        timeout: Seconds the ingest may take.

    Returns:
        The demo, or None (nothing sent) when Kinesis is not an emulator.
    """
    if not settings.is_local_endpoint:
        return None
    demo = demo_settings(settings)
    client = start_afresh(spark, demo, DEMO_SUFFIX)
    stream = order_changes(orders=orders, changes=changes, seed=seed)
    spec = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER)
    # Made here rather than by the ingest (which finds them declared as it would), so that both carry
    # the demo's mark from their first commit.
    comment = f"Orders kept current from the changes on Kinesis stream {demo.stream_name} (notebook 06)"
    create_keyed_table(spark, demo.table_name, spec.keyed, comment, demo.changes_mode, demo_mark(DEMO_SUFFIX))
    create_rejects_table(spark, demo, properties=demo_mark(DEMO_SUFFIX))
    try:
        # Within the emulator's per-shard write limits, retrying what it throttles (as the workbook's producer does).
        produce(demo, [Record(data, key, "change", 0.0, 0.0) for data, key in stream.records], progress=False)
        batch_records = max(50, len(stream.records) // 12)  # several batches, several MERGEs
        query = start_ingest(
            spark,
            demo,
            available_now=True,
            trigger_seconds=0,
            changes=spec,
            max_records_per_shard=batch_records,
            progress_file=demo.path("run_dir") / f"{DEMO_SUFFIX}_progress.jsonl",
        )
        query.await_termination(timeout=timeout)
    finally:
        client.delete_stream(StreamName=demo.stream_name, EnforceConsumerDeletion=True)
    error = query.exception()
    if error is not None:
        raise error
    return ChangeDemo(demo, spec, stream, list(query.recent_progress), batch_records)
