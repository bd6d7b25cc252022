"""A crash drill for the source: SIGKILL the whole query process at one stage of a batch.

The crash campaign (``tests/reliability/test_crash_kinesis_source.py``) runs a query in a process
of its own and sets ``ICESTREAM_SOURCE_CRASH=<stage>:<n>``, ``ICESTREAM_SOURCE_CRASH_GROUP`` (that
process's group) and ``ICESTREAM_SOURCE_CRASH_DIR`` (where the calls are counted, since the stages
run in different Python workers). The n-th time any worker reaches the stage, it kills the group:

- ``latest_offset``: the driver is fixing a batch's end, before Spark writes it to the offset log;
- ``partitions``: Spark wrote the offset log and is planning the batch's tasks;
- ``read``: a task has handed half its rows to the sink's writer (the middle of the write).

(The fourth moment, after the table commit and before Spark's commit log, is no stage of the
source: the campaign makes Spark's commit-log write fail there.) Without the variables nothing
happens; this is a test's tool, never a production setting.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

STAGES = ("latest_offset", "partitions", "read")
ENV = "ICESTREAM_SOURCE_CRASH"


def reached(stage: str) -> None:
    """Count one arrival at ``stage``; kill the query's process group if the drill is set for this one."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    name, _, number = wanted.partition(":")
    if name != stage:
        return
    folder = Path(os.environ[f"{ENV}_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    count = 1
    while True:  # the first free mark is this arrival's number, whichever process it runs in
        try:
            os.close(os.open(folder / f"{stage}-{count}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            count += 1
    if count == int(number or 1):
        os.killpg(int(os.environ[f"{ENV}_GROUP"]), signal.SIGKILL)
