"""The notebook pass's sizes, shared by the notebook test and the browser test (the same cells and checks, smaller)."""

from __future__ import annotations

# 06 and 07 on smaller tables, one read per measurement (make run takes the median of 3): the same cells and checks.
SMALL_06 = {"mode_orders": 5000, "reads": 1, "demo_changes": 1000}
SMALL_07 = {"metrics_records": 600, "metrics_parts": 2}
# The first pass: every notebook at its defaults, except the live parts: 01's (45 s in make run) and 02's
# own (20 s), 10 s each show the same cells; and 05's routed demo and 06's and 07's tables, smaller (below).
FIRST_PASS = (
    ("00", {}), ("01", {"live_seconds": 10.0}), ("02", {"live_seconds": 10.0}), ("03", {}), ("04", {}),
    ("05", {"routed_records": 1000}),  # its routed demo on a third of the history (the stream's own cost)
    ("06", SMALL_06), ("07", SMALL_07),
    ("08", {}), ("09", {}), ("10", {}), ("11", {}),
)  # fmt: skip
