"""The condition that keeps a set of production runs' events, their ids bound as values.

Every generated event carries its run's id (``properties["run_id"]``). :func:`run_filter` is the
condition every question of :mod:`icestream.queries.realtime` adds for the runs it is asked about;
which runs a notebook calls "this run" is :func:`icestream.demos.this_run`.
"""

from __future__ import annotations

from collections.abc import Sequence

from icestream.synthetic.generator import RUN_ID_PROPERTY


def run_filter(run_ids: Sequence[str] | None) -> tuple[str, dict[str, str]]:
    """A condition keeping only the events of ``run_ids`` (None: every event), and its bound values.

    Returns:
        ``(" AND properties['run_id'] IN (:run_0, ...)", {"run_0": ...})``, or ``("", {})``.
    """
    if run_ids is None:
        return "", {}
    if not run_ids:
        return " AND false", {}
    args = {f"run_{index}": str(run_id) for index, run_id in enumerate(run_ids)}
    markers = ", ".join(f":{name}" for name in args)
    return f" AND properties['{RUN_ID_PROPERTY}'] IN ({markers})", args
