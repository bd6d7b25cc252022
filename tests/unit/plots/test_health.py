"""The before/after maintenance chart draws each number on its own linear axis."""

import matplotlib

matplotlib.use("Agg")


from icestream.plots.health import before_after


def test_before_after_one_linear_panel_per_number_and_zero_is_zero() -> None:
    fig = before_after(
        {"data files": 20, "snapshots": 9, "metadata MiB": 0.4}, {"data files": 1, "snapshots": 0, "metadata MiB": 0.5}
    )
    assert [ax.get_title() for ax in fig.axes] == ["data files", "snapshots", "metadata MiB"]
    assert all(ax.get_yscale() == "linear" for ax in fig.axes)
    assert [patch.get_height() for patch in fig.axes[1].patches] == [9.0, 0.0]
