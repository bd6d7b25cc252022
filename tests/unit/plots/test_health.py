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
