"""Charts of an ingest run: the backlog batch on a panel of its own, the lag per shard."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd

from icestream.plots.report import plot_lag, plot_phases, plot_rates

PROGRESS = pd.DataFrame(
    {
        "batch_id": [14, 15, 16],
        "backlog": [True, False, False],
        "input_rows_per_s": [2300.0, 100.0, 98.0],
        "processed_rows_per_s": [2300.0, 900.0, 950.0],
        "read_s": [13.9, 0.5, 0.4],
        "write_events_s": [1.0, 0.3, 0.3],
    }
)


def test_the_backlog_batch_gets_its_own_panel_and_scale() -> None:
    fig = plot_phases(PROGRESS)
    backlog, live = fig.axes
    assert live.get_ylim()[1] < 1000, "the live batches use their own scale"
    assert "backlog" in backlog.get_xlabel()
    assert "live" in live.get_xlabel()
    plt.close(fig)


def test_the_rates_answer_whether_it_keeps_up_on_one_log_axis_with_the_backlog_shaded() -> None:
    fig = plot_rates(PROGRESS)
    (ax,) = fig.axes
    arrived, processed = ax.get_lines()
    assert ax.get_yscale() == "log"
    assert list(arrived.get_xdata()) == list(processed.get_xdata()) == [14, 15, 16], "every batch, one line"
    assert list(processed.get_ydata()) == [2300.0, 900.0, 950.0]
    shaded = [patch for patch in ax.patches if patch.get_label().startswith("backlog")]
    assert len(shaded) == 1
    assert shaded[0].get_x() == 13.5
    plt.close(fig)


def test_phases_have_distinct_colours() -> None:
    fig = plot_phases(PROGRESS[~PROGRESS["backlog"]])
    colours = {bar.patches[0].get_facecolor() for bar in fig.axes[0].containers}
    assert len(colours) == len(fig.axes[0].containers) == 2
    plt.close(fig)


def test_the_lag_chart_draws_one_line_per_shard_and_the_lag_after_the_read() -> None:
    lag = pd.DataFrame(
        {
            "batch_id": [14, 14, 15, 15],
            "shard": ["0", "1"] * 2,
            "read": [9, 9, 1, 1],
            "behind_before_s": [90.0, 85.0, 2.0, None],
            "behind_after_s": [0.0] * 4,
        }
    ).astype({"behind_before_s": "Float64", "behind_after_s": "Float64"})
    fig = plot_lag(lag)
    assert [line.get_label() for line in fig.axes[0].lines] == [
        "shard 0",
        "shard 1",
        "after the read (max over shards)",
    ]
    assert fig.axes[0].lines[0].get_ydata().tolist() == [90.0, 2.0]
    plt.close(fig)
