"""Charts of the Structured Streaming notebook (08): event time against the watermark, batch by batch."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


def watermark_progress(progress: pd.DataFrame, dropped: pd.Series | None = None, title: str | None = None) -> Figure:
    """The event times each micro-batch read and the watermark it ran with (top), rows in and dropped (bottom).

    Args:
        progress: :func:`icestream.queries.streaming.progress_table` rows (batches without input are
            kept: they are the batches that moved the watermark and wrote the closed windows).
        dropped: Events the watermark dropped per ``batch_id`` (the truth computed in pandas), drawn
            beside the rows read.
        title: Chart title.

    Returns:
        The figure.
    """
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True, height_ratios=(3, 2))
    batches = progress["batch_id"]
    oldest, newest, watermark = (
        pd.to_datetime(progress[column], utc=True).dt.tz_convert(None)
        for column in ("min_event_ts", "max_event_ts", "watermark")
    )
    top.vlines(batches, oldest, newest, color="tab:blue", alpha=0.4, label="event times the batch read")
    top.plot(batches, newest, "o", color="tab:blue", label="newest event time in the batch")
    top.plot(
        batches, watermark, "_", color="tab:red", markersize=24, markeredgewidth=2, label="watermark the batch ran with"
    )
    top.set_ylabel("event time (UTC)")
    top.legend(loc="upper left", fontsize=8)
    top.set_title(title or "Event time and the watermark, per micro-batch")
    counts = pd.DataFrame({"read": progress["input_rows"].to_numpy()}, index=batches)
    if dropped is not None:
        counts["dropped by the watermark"] = dropped.reindex(batches, fill_value=0).to_numpy()
    width = 0.8 / len(counts.columns)
    for number, column in enumerate(counts.columns):
        bottom.bar(counts.index + (number - (len(counts.columns) - 1) / 2) * width, counts[column], width, label=column)
    bottom.set_yscale("symlog")
    bottom.set_ylabel("events (log scale)")
    bottom.set_xlabel("micro-batch (batch id)")
    bottom.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig
