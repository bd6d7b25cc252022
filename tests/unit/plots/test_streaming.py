"""The watermark chart draws the newest event time, the watermark and the rows, with missing watermarks."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd

from icestream.plots.streaming import watermark_progress


def test_the_chart_has_both_panels_and_draws_a_batch_without_a_watermark() -> None:
    progress = pd.DataFrame(
        {
            "batch_id": [0, 1, 2],
            "input_rows": [10, 0, 12],
            "min_event_ts": pd.to_datetime(["2026-01-01 00:00", None, "2026-01-01 00:10"], utc=True),
            "max_event_ts": pd.to_datetime(["2026-01-01 00:20", None, "2026-01-01 00:40"], utc=True),
            "watermark": pd.to_datetime([None, "2026-01-01 00:18", "2026-01-01 00:18"], utc=True),
        }
    )
    fig = watermark_progress(progress, dropped=pd.Series([3], index=[2]), title="t")
    top, bottom = fig.axes
    labels = [text.get_text() for text in bottom.get_legend().get_texts()]
    heights = [patch.get_height() for patch in bottom.patches]
    plt.close(fig)
    assert top.get_title() == "t"
    assert labels == ["read", "dropped by the watermark"]
    assert heights == [10, 0, 12, 0, 0, 3]
