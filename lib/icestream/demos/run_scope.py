"""Which production runs a table holds, and which of them are "this run" (notebooks 02, 03).

A lake that has seen several runs of the workbook holds each run's history and live events, over
overlapping hours. Every generated event carries its run's id (``properties["run_id"]``): this run
is the last backfill (its run summary names it) and every run whose first record reached Kinesis
after that backfill finished sending (the live producer 01 starts next). The questions of
:mod:`icestream.queries.realtime` take the ids :func:`this_run` names.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from icestream.lake.statement import Statement
from icestream.producer.run import read_run_summary, run_summary_path
from icestream.synthetic.generator import RUN_ID_PROPERTY

if TYPE_CHECKING:
    import pandas as pd

    from icestream.config import Settings
    from icestream.lake.table import LakeTable


@dataclass(frozen=True)
class RunScope:
    """The runs a notebook calls "this run", among every run the table holds.

    Attributes:
        run_ids: This run's ids (None: no summary to tell runs apart, so every event counts).
        runs: Every run in the table, first arrival first: ``run_id``, ``events``, ``first_event``,
            ``last_event`` (event time), ``first_arrival`` (Kinesis arrival, UTC), ``this_run``.
        live_from: Where this run's live events start in event time (the backfill's end), or None.
    """

    run_ids: tuple[str, ...] | None
    runs: pd.DataFrame
    live_from: datetime | None


def this_run(table: LakeTable, settings: Settings) -> RunScope:
    """Which runs of the table are this run's: the last backfill, and the runs that started after it.

    The backfill's run summary (written by 01 or ``icestream produce --backfill-hours``) names its
    run id and when it finished sending; a run whose first record reached Kinesis after that is this
    run's live production. Without a summary every run counts (``run_ids`` None).

    Returns:
        The scope; ``runs`` lists every run in the table (one recorded statement).
    """
    import pandas as pd

    frame = table.run(
        Statement(
            f"""
            SELECT properties['{RUN_ID_PROPERTY}'] AS run_id, count(*) AS events,
                   min(event_ts) AS first_event, max(event_ts) AS last_event, min(arrival_ts) AS first_arrival
            FROM {table.name}
            GROUP BY 1
            ORDER BY first_arrival, run_id
            """
        )
    ).toPandas()
    summary = read_run_summary(run_summary_path(settings, "backfill"))
    if summary is None or summary.run_id is None:
        frame["this_run"] = True
        return RunScope(None, frame, None)
    sent_by = pd.Timestamp(summary.finished_at, unit="s")  # naive UTC, as toPandas gives arrival_ts
    frame["this_run"] = (frame["run_id"] == summary.run_id) | (frame["first_arrival"] >= sent_by)
    return RunScope(tuple(frame.loc[frame["this_run"], "run_id"].dropna()), frame, summary.window_end)
