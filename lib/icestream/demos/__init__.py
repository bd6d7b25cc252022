"""The workbook's scenarios: each makes something happen and checks it against what it knows is true.

A scenario drives a stream, an ingest or a table of its own for one lesson and compares the result
with its ground truth; none of it is part of a scheduled job, which imports nothing from here
(``tests/unit/test_layers.py`` checks it), so a slim install for jobs can leave it out.

- :mod:`~icestream.demos.layout_demo`: a tiny table to walk file by file (notebook 00).
- :mod:`~icestream.demos.hot_shard`: a shard's write limit shown on a stream of its own (notebook 01).
- :mod:`~icestream.demos.malformed_showcase`: a malformed payload with the ingest's verdict and the
  point where it breaks (notebook 01).
- :mod:`~icestream.demos.crash_demo`: the ingest as its own process, SIGKILLed inside a batch and
  restarted: nothing lost, nothing twice (notebook 02).
- :mod:`~icestream.demos.run_scope`: which production runs a table holds, and which are this run's
  (notebook 03).
- :mod:`~icestream.demos.routed_demo`: two record kinds and a new field, routed and evolved (notebook 05).
- :mod:`~icestream.demos.change_demo`: change data kept as a keyed table (notebook 06).
- :mod:`~icestream.demos.metrics_demo`: real_time_metrics kept by the ingest (notebook 07).
- :mod:`~icestream.demos.anomaly_evaluation`: the run to score, and the detector's flags against its
  ground truth (notebook 08).
"""

from icestream.demos.anomaly_evaluation import evaluate, label_windows, scoring_scope
from icestream.demos.change_demo import change_stream_demo
from icestream.demos.crash_demo import crash_demo, processes_in_group, wait_for_pause
from icestream.demos.hot_shard import hot_shard_demo
from icestream.demos.layout_demo import create_layout_demo
from icestream.demos.malformed_showcase import show_malformed
from icestream.demos.metrics_demo import metrics_stream_demo
from icestream.demos.routed_demo import routed_stream_demo
from icestream.demos.run_scope import this_run

__all__ = [
    "change_stream_demo",
    "crash_demo",
    "create_layout_demo",
    "evaluate",
    "hot_shard_demo",
    "label_windows",
    "metrics_stream_demo",
    "processes_in_group",
    "routed_stream_demo",
    "scoring_scope",
    "show_malformed",
    "this_run",
    "wait_for_pause",
]
