"""The user's transform step (the role of a Firehose transformation Lambda): load it, run it, route its rejects.

A transform is a function ``DataFrame -> DataFrame`` that gets a batch's new, deduplicated events
with the events table's columns and returns them changed (enriched, filtered, fixed). It runs on
the driver over Spark DataFrames, so only the driver needs its module, and it must be
deterministic: a batch retried after a crash runs it again over the same rows.

**Rejecting rows.** The returned frame may add a string column :data:`REASON_COLUMN`
(``reject_reason``) and optionally :data:`DETAIL_COLUMN` (``reject_detail``). Rows whose reason is
not null go to the rejects table with that reason (as given) and detail, in the same commit as the
batch's other rejects and with the same positions; the others go to the events table. A rejected
row's ``raw_data`` is the row as the transform returned it, as JSON (the record's original bytes
are not kept for events that parsed). Rows it filters out are simply dropped
(``transform_dropped`` in the progress).

From the command line, ``--transform module:function`` names it (:func:`load_transform`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from icestream.errors import ConfigError
from icestream.lake.schema import REJECT_COLUMNS_DDL, table_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from icestream.ingest.reading.read_stats import ReadStats

REASON_COLUMN = "reject_reason"
DETAIL_COLUMN = "reject_detail"
REJECT_COLUMNS = tuple(column.split()[0] for column in REJECT_COLUMNS_DDL)


def load_transform(spec: str) -> Callable[[DataFrame], DataFrame]:
    """Import the transform named ``module:function`` (the module must be importable by this Python).

    Args:
        spec: ``package.module:function``.

    Returns:
        The function.

    Raises:
        ConfigError: If the spec is malformed, the module cannot be imported, or it has no such
            callable.
    """
    return load_function(spec, "--transform")


def load_function(spec: str, option: str) -> Callable[..., Any]:
    """Import the function named ``module:function`` for ``option`` (``--transform``, ``--route``).

    Raises:
        ConfigError: If the spec is malformed, the module cannot be imported, or it has no such callable.
    """
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise ConfigError(f"{option} {spec!r}: name it as module:function, e.g. mytransforms:enrich.")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - any failure while importing user code is reported the same way
        raise ConfigError(
            f"{option} {spec!r}: cannot import {module_name} ({type(error).__name__}: {error}). "
            "Put its folder on PYTHONPATH (or install it) and check it imports on its own."
        ) from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ConfigError(f"{option} {spec!r}: {module_name} has no function {function_name}.")
    return function


def run_transform(
    transform: Callable[[DataFrame], DataFrame], events: DataFrame, batch_id: int | None, keep: Sequence[str] = ()
) -> tuple[DataFrame, DataFrame | None]:
    """Run ``transform`` over ``events``; split its result into events and rejects.

    Args:
        transform: The user's function.
        events: The batch's new events, with the events table's columns (and ``keep``).
        batch_id: Written to the rejects' ``batch_id`` (None for a file load).
        keep: Columns beside the table's that the events keep when the result still has them
            (schema evolution's new fields: a transform that drops them leaves them out).

    Returns:
        ``(events, rejects)``: the rows to write to each table; rejects is None when the transform
        adds no ``reject_reason`` column.

    Raises:
        ConfigError: If the result lost a table column, or its reason column is not a string.
    """
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias
    from pyspark.sql.types import StringType

    result = transform(events)
    missing = [column for column in table_columns() if column not in result.columns]
    if missing:
        raise ConfigError(f"the ingest transform must keep the table's columns; it dropped {', '.join(missing)}.")
    columns = (*table_columns(), *(column for column in keep if column in result.columns))
    if REASON_COLUMN not in result.columns:
        return result.select(*columns), None
    if not isinstance(result.schema[REASON_COLUMN].dataType, StringType):
        raise ConfigError(f"the ingest transform's {REASON_COLUMN} column must be a string (null: keep the row).")
    return result.where(F.col(REASON_COLUMN).isNull()).select(*columns), reject_rows(result, batch_id)


def reject_rows(result: DataFrame, batch_id: int | None) -> DataFrame:
    """The rows of ``result`` with a non-null :data:`REASON_COLUMN`, as rows of the rejects table.

    Their ``raw_data`` is the row's table columns as JSON; the detail defaults to the transform's.
    """
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    reason = F.col(REASON_COLUMN)
    detail = F.col(DETAIL_COLUMN).cast("string") if DETAIL_COLUMN in result.columns else F.lit(None).cast("string")
    raw_text = F.to_json(F.struct(*[F.col(name) for name in table_columns()]))
    rejects = result.where(reason.isNotNull()).select(
        F.encode(raw_text, "UTF-8").alias("raw_data"),
        raw_text.alias("raw_text"),
        reason.alias("reason"),
        F.coalesce(detail, F.lit("rejected by the ingest transform")).alias("detail"),
        F.lit(batch_id).cast("bigint").alias("batch_id"),
        "shard_id",
        "sequence_number",
        "partition_key",
        "arrival_ts",
        "ingest_ts",
    )
    return rejects.select(*REJECT_COLUMNS)


def done_ids(committed: Mapping[str, str | None], shards: Iterable[ReadStats]) -> dict[str, list[str]]:
    """Per shard, the ids of the new events a table's mark covers inside the aggregate it ends in.

    Args:
        committed: Per shard, the table's committed mark (``<sequence>:<sub>`` when inside an aggregate).
        shards: The read tasks' stats (their ``inside_ids``).
    """
    done: dict[str, list[str]] = {}
    for stats in shards:
        last, _, sub = (committed.get(stats.shard_id) or "").partition(":")
        if sub:
            done[stats.shard_id] = [
                event_id
                for sequence, part, event_id in stats.inside_ids
                if sequence == last and part is not None and part <= int(sub)
            ]
    return done


def after_committed(committed: Mapping[str, str | None], done_ids: Mapping[str, Sequence[str]]) -> Column:
    """A predicate: the row is past its shard's entry in ``committed`` (a table's marks: rejects, a routed table).

    A batch re-read after a crash between the rejects commit and the events commit gives the
    transform the same events again; the rejects it routes up to the rejects table's committed
    position are already there and must not be written twice.

    Args:
        committed: Per shard, the rejects table's committed mark (``<sequence>`` or ``<sequence>:<sub>``).
        done_ids: Per shard, the event ids of the user records that mark covers inside the KPL
            aggregate it ends in (the read tasks report them: rows carry no sub-sequence number).
            A transform that changes ``event_id`` defeats this one case: those rows would be written twice.
    """
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias

    keep = F.lit(True)
    sequence = F.col("sequence_number")
    for shard_id, mark in committed.items():
        if not mark:
            continue
        last, _, sub = mark.partition(":")
        # Sequence numbers are decimal strings: numeric order is length, then text.
        same_length = F.length(sequence) == len(last)
        before = (F.length(sequence) < len(last)) | (same_length & (sequence < F.lit(last)))
        if not sub:
            before |= same_length & (sequence == F.lit(last))
        elif done_ids.get(shard_id):
            before |= (sequence == F.lit(last)) & F.col("event_id").isin(sorted(set(done_ids[shard_id])))
        keep &= ~((F.col("shard_id") == F.lit(shard_id)) & before)
    return keep
