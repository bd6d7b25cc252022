"""A read task: the function Spark's ``mapInArrow`` runs over a batch's shard plans, rows out as Arrow.

A task reads its shards side by side (:mod:`~icestream.ingest.reading.threads`), each with
:func:`~icestream.ingest.reading.shard_reader.read_shard`, and its shards share their records (a shard takes what
the others left, the task at most the sum of their shares); each shard's rows leave in Arrow record
batches of at most :data:`~icestream.ingest.reading.shard_reader.ARROW_CHUNK_ROWS` rows.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from icestream.ingest.reading.record_rows import ARROW_CHUNK_ROWS, arrow_schema, record_batch
from icestream.ingest.reading.shard_plan import ShardPlan
from icestream.ingest.reading.shard_reader import ReadOptions, read_shard
from icestream.ingest.reading.threads import RecordBudget, side_by_side


def shard_batches(plan: ShardPlan, options: ReadOptions, schema: Any, budget: RecordBudget | None) -> Iterator[Any]:
    """One shard's rows as Arrow record batches of at most :data:`ARROW_CHUNK_ROWS` rows."""
    chunk: list[tuple] = []
    for row in read_shard(plan, options, budget=budget):
        chunk.append(row)
        if len(chunk) >= ARROW_CHUNK_ROWS:
            yield record_batch(chunk, schema, options.batch_id, options.ingest_ts)
            chunk = []
    if chunk:
        yield record_batch(chunk, schema, options.batch_id, options.ingest_ts)


def read_arrow(options: ReadOptions, plans: Sequence[ShardPlan]) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The function Spark's ``mapInArrow`` runs per partition of ``spark.range(len(plans))``: the
    ids in, the rows of ``plans[id]`` out.

    The plans travel in this function's closure, so a batch's read needs no DataFrame built from
    Python data (that cost a Python RDD, its closure cleaning and a schema conversion per batch).
    Rows leave the Python worker as Arrow record batches, not pickled tuples: measured here about
    20 % less time per 10,000 rows for the hand-over to the JVM, which is a fixed share of every read.
    A task's shards are read side by side, ``options.shard_threads`` at once, sharing their records.
    """

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        schema = arrow_schema()
        # The rows are acyclic (tuples, strings, dicts): reference counting frees them, and the
        # cyclic collector would only rescan the growing chunk, again and again (bench: a third
        # of the client's time per 60,000 records). The task's Python worker runs nothing else.
        collecting = gc.isenabled()
        gc.disable()
        try:
            chosen = [plans[index] for batch in batches for index in batch.column(0).to_pylist()]
            together = len(chosen) if len(chosen) <= options.shard_threads else 0  # all at once: counted now
            pool = RecordBudget(together) if options.pooled_cap and len(chosen) > 1 else None
            reads = [partial(shard_batches, plan, options, schema, pool) for plan in chosen]
            yield from side_by_side(reads, options.shard_threads, pool.close if pool is not None else None)
        finally:
            if collecting:
                gc.enable()

    return run
