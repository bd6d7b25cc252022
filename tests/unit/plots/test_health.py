"""The before/after maintenance chart draws each number on its own linear axis."""

import matplotlib

matplotlib.use("Agg")


from icestream.plots.health import before_after


def test_before_after_one_linear_panel_per_number_and_zero_is_zero() -> None:
    fig = before_after(
        {"data files": 20, "snapshots": 9, "metadata MiB": 0.4}, {"data files": 1, "snapshots": 0, "metadata MiB": 0.5}
    )
    assert [ax.get_title().splitlines()[0] for ax in fig.axes] == ["data files", "snapshots", "metadata MiB"]
    assert all(ax.get_yscale() == "linear" for ax in fig.axes)
    assert [patch.get_height() for patch in fig.axes[1].patches] == [9.0, 0.0]


def test_after_bars_are_coloured_by_what_changed() -> None:
    from matplotlib.colors import to_rgba

    from icestream.plots.health import CHANGE_COLORS

    fig = before_after(
        {"data files": 20, "deleted": 3, "metadata MiB": 0.4}, {"data files": 1, "deleted": 3, "metadata MiB": 0.5}
    )
    after = [to_rgba(ax.patches[1].get_facecolor()) for ax in fig.axes]
    assert after == [to_rgba(CHANGE_COLORS[change]) for change in ("fewer", "unchanged", "more")]


def test_file_size_histogram_counts_whole_files() -> None:
    import pandas as pd

    from icestream.plots.health import file_size_histogram

    files = pd.DataFrame({"content": [0, 0, 0], "file_size_in_bytes": [4_000, 9_000, 70_000]})
    fig = file_size_histogram(files, target_bytes=128 * 2**20)
    ticks = fig.axes[0].get_yticks()
    assert len(ticks) >= 2
    assert all(float(tick).is_integer() for tick in ticks), ticks


def test_files_per_partition_draws_each_hour_before_and_after_compaction() -> None:
    import pandas as pd

    from icestream.plots.health import files_per_partition

    before = pd.Series({"2026-11-26 10:00": 3, "2026-11-26 11:00": 2})
    fig = files_per_partition(before, pd.Series({"2026-11-26 10:00": 1, "2026-11-26 11:00": 1}), limit=10)
    ax = fig.axes[0]
    assert [patch.get_height() for patch in ax.patches] == [3, 2, 1, 1]
    assert [label.get_text() for label in ax.get_xticklabels()] == list(before.index)
    assert all(float(tick).is_integer() for tick in ax.get_yticks())
