"""One stream, two kinds of record and a field that appears mid-run, routed and evolved by the ingest (notebook 05).

:func:`routed_stream_demo` sends a generated history with order events beside the user events and a
top-level field (``app_version``) that user events carry from time T on
(:mod:`icestream.synthetic.second_kind`) to a stream of its own, then runs the streaming ingest over
it once with a route (``order`` to ``<table>_orders``, every other type to the events table) and
``schema_evolution: add-columns``: the orders table is made on first sight, and the batch that first
brings ``app_version`` adds it as a column. The tables are ``<table>_routing`` (events),
``<table>_routing_orders`` and ``<table>_routing_rejects``, dropped and made again on every run so a
second run reads as the first (only tables the demo made: :mod:`icestream.lake.demo_tables`); the
stream is deleted after the ingest. It runs on the local
emulator only (on AWS it would create and pay for a stream). The generator's user events also carry
two top-level fields that ``off`` keeps in ``properties`` (``experiment``, ``locale``): with
evolution on they become columns in the first batch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from icestream.config import ROUTED_DEMO_ORDERS_SUFFIX, ROUTED_DEMO_SUFFIX
from icestream.ingest.query import start_ingest
from icestream.ingest.routing import table_refusal
from icestream.kinesis.clients import ensure_stream, kinesis_client
from icestream.lake.demo_tables import adopt_demo_table, demo_mark, drop_demo_tables
from icestream.lake.statement import Statement
from icestream.lake.table import LakeTable, setup_tables
from icestream.producer.put import produce
from icestream.runtime.handles import first_row
from icestream.synthetic.generator import backfill_config, generate
from icestream.synthetic.second_kind import NEW_FIELD, ORDER_EVENT_TYPE, TableTruth, as_options, id_checksum

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

    from icestream.config import Settings

DEMO_SUFFIX = ROUTED_DEMO_SUFFIX
ORDERS_SUFFIX = ROUTED_DEMO_ORDERS_SUFFIX
ROUTING = {"route": "event_type", "route_tables": f"{ORDER_EVENT_TYPE}={ORDERS_SUFFIX}"}
SCHEMA_EVOLUTION = "add-columns"


@dataclass(frozen=True)
class RoutedDemo:
    """What the demo sent and what its ingest did."""

    settings: Settings  # the demo's stream and tables
    truths: list[TableTruth]  # per table kind, what it must hold
    progress: list[dict[str, Any]]  # the ingest's batches

    def table_name(self, kind: str) -> str:
        """The table of a truth's kind (``events`` or ``orders``)."""
        return self.settings.table_name if kind == "events" else self.settings.companion_table_name(ORDERS_SUFFIX)

    @property
    def schema_changes(self) -> list[tuple[int, str, str]]:
        """``(batch, table, changes)`` for each batch that changed a table's schema."""
        return [
            (batch["batch_id"], table, changes)
            for batch in self.progress
            for table, changes in sorted(batch["schema_changes"].items())
        ]

    def compare(self, spark: SparkSession) -> pd.DataFrame:
        """Per table: the rows and the ids' checksum it holds against the truth, and the rows with the new field.

        Each read is a recorded :class:`~icestream.lake.statement.Statement` of the table (shown when
        :func:`~icestream.lake.show_statements` is on).
        """
        import pandas as pd

        rows = []
        for truth in self.truths:
            table = LakeTable(spark, self.table_name(truth.table))
            columns = set(table.run(Statement(f"SELECT * FROM {table.name} LIMIT 0")).columns)
            with_field = f"count({NEW_FIELD})" if NEW_FIELD in columns else "0"
            counted = first_row(table.run(Statement(f"SELECT count(*) AS n, {with_field} AS f FROM {table.name}")))
            ids = table.run(Statement(f"SELECT event_id FROM {table.name}")).collect()
            rows.append(
                {
                    "table": table.name,
                    "rows": int(counted.n),
                    "rows expected": truth.rows,
                    "ids match": id_checksum(row.event_id for row in ids) == truth.id_checksum,
                    f"{NEW_FIELD} is a column": NEW_FIELD in columns,
                    f"rows with {NEW_FIELD}": int(counted.f),
                    f"rows with {NEW_FIELD} expected": truth.rows_with_new_field,
                }
            )
        return pd.DataFrame(rows)


def start_afresh(spark: SparkSession, demo: Settings, name: str, others: tuple[str, ...] = ()) -> Any:
    """Drop a demo's tables (its table, its rejects and ``others``) and make its 2-shard stream again, so a
    second run of a notebook reads as the first; return a Kinesis client of the demo's endpoint.

    Only tables the demo made are dropped (:func:`~icestream.lake.demo_tables.drop_demo_tables`): the
    tables are checked before anything is dropped or the stream touched.

    Args:
        spark: The session.
        demo: The demo's settings (its stream and tables).
        name: The demo's name, the mark its tables carry (its table suffix).
        others: More of the demo's tables.

    Raises:
        TableOwnershipError: If a table of the demo's names exists that the demo did not make.
    """
    drop_demo_tables(spark, (demo.table_name, *others, demo.rejects_table_name), name)
    client = kinesis_client(demo)
    if demo.stream_name in client.list_streams()["StreamNames"]:
        client.delete_stream(StreamName=demo.stream_name, EnforceConsumerDeletion=True)
    ensure_stream(demo, shard_count=2)
    return client


def routed_stream_demo(
    spark: SparkSession,
    settings: Settings,
    records: int = 3000,
    hours: float = 1.0,
    order_rate: float = 0.3,
    new_field_share: float = 0.5,
    seed: int = 11,
    timeout: float = 600.0,
) -> RoutedDemo | None:
    """Send the two-kind history to a new stream and ingest it routed, with schema evolution.

    Args:
        spark: The session.
        settings: The workbook's settings; the demo's stream is ``<stream>-routing``, its tables ``<table>_routing*``.
        records: User-side records of the history (events, duplicates, malformed), exactly.
        hours: Length of the history.
        order_rate: Order events per second of history, on top.
        new_field_share: T, as a share of the history: user events after it carry the new field.
        seed: The generator's seed.
        timeout: Seconds the ingest may take.

    Returns:
        The demo, or None (nothing sent) when Kinesis is not an emulator.
    """
    if not settings.is_local_endpoint:
        return None
    demo = replace(settings.companion(DEMO_SUFFIX), stream_name=f"{settings.stream_name}-{DEMO_SUFFIX}")
    orders = demo.companion_table_name(ORDERS_SUFFIX)
    client = start_afresh(spark, demo, DEMO_SUFFIX, (orders,))
    setup_tables(spark, demo, demo_mark(DEMO_SUFFIX))
    config = backfill_config(
        hours=hours,
        records=records,
        seed=seed,
        anomalies=(),
        **as_options(order_rate, hours * 3600 * new_field_share),
    )
    sent, generator = generate(config)
    try:
        produce(demo, sent, progress=False)
        query = start_ingest(
            spark,
            demo,
            available_now=True,
            trigger_seconds=0,
            routing=ROUTING,
            schema_evolution=SCHEMA_EVOLUTION,
            max_records_per_shard=max(100, records // 8),  # several batches: T falls in a later one
            progress_file=demo.path("run_dir") / f"{DEMO_SUFFIX}_progress.jsonl",
        )
        query.await_termination(timeout=timeout)
    finally:
        client.delete_stream(StreamName=demo.stream_name, EnforceConsumerDeletion=True)
        # The ingest makes the orders table on first sight (the lesson), so the demo marks it after: the
        # name was free when the demo started, and the route's owner property says its route made it.
        if spark.catalog.tableExists(orders) and table_refusal(spark, demo, orders, demo.stream_name) is None:
            adopt_demo_table(spark, orders, DEMO_SUFFIX)
    assert generator.tables is not None  # the config turns the second kind on
    return RoutedDemo(demo, generator.tables.truths(), list(query.recent_progress))
