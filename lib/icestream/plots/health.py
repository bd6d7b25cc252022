"""Charts of notebook 09: file sizes, files per partition before and after compaction, before/after maintenance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


def file_size_histogram(files: pd.DataFrame, target_bytes: int, small_bytes: int | None = None) -> Figure:
    """Histogram of data file sizes on a log axis, with the target (and small-file) size marked.

    Args:
        files: ``LakeTable.inspect.files()`` (only ``content == 0`` rows are drawn).
        target_bytes: The table's target file size.
        small_bytes: The small-file size, if it differs from the target.

    Returns:
        The figure.
    """
    sizes = files.loc[files["content"] == 0, "file_size_in_bytes"].to_numpy(dtype=float) / 1024
    fig, ax = plt.subplots(figsize=(8, 3.5))
    if len(sizes):
        low, high = max(sizes.min(), 0.1), max(sizes.max(), target_bytes / 1024)
        ax.hist(sizes, bins=np.geomspace(low * 0.9, high * 1.1, 40).tolist(), color="tab:blue")
    ax.axvline(target_bytes / 1024, color="tab:green", linestyle="--", label=f"target {target_bytes / 2**20:g} MiB")
    if small_bytes:
        ax.axvline(small_bytes / 1024, color="tab:orange", linestyle=":", label=f"small < {small_bytes / 2**20:g} MiB")
    ax.set_xscale("log")
    ax.set(xlabel="file size (KiB, log scale)", ylabel="data files", title=f"Data file sizes ({len(sizes)} files)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # a count of files: no quarter files on the axis
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def files_per_partition(before: pd.Series, after: pd.Series | None = None, limit: int | None = None) -> Figure:
    """Data files per partition before (and after) compaction, side by side, with the report's limit.

    Args:
        before: Partition label → data files, e.g. from the ``partitions`` metadata table.
        after: The same after compaction (a partition missing from it is drawn as 0), or None.
        limit: The health report's files-per-partition limit, drawn as a line.

    Returns:
        The figure.
    """
    labels = [str(label) for label in before.index]
    positions = np.arange(len(labels))
    width = 0.4 if after is not None else 0.8
    fig, ax = plt.subplots(figsize=(8, 3.5))
    bars = ax.bar(
        positions - (width / 2 if after is not None else 0),
        before.to_numpy(),
        width,
        label="before",
        color=BEFORE_COLOR,
    )
    ax.bar_label(bars, fontsize=8)
    if after is not None:
        after_counts = after.reindex(before.index, fill_value=0).to_numpy()
        bars = ax.bar(
            positions + width / 2, after_counts, width, label="after compaction", color=CHANGE_COLORS["fewer"]
        )
        ax.bar_label(bars, fontsize=8)
    if limit is not None:
        ax.axhline(limit, color="tab:orange", linestyle="--", label=f"limit {limit}")
    ax.set_xticks(positions, labels, rotation=45, ha="right", fontsize=8)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # whole files
    ax.margins(y=0.15)
    ax.set(xlabel="partition (event hour, UTC)", ylabel="data files", title="Data files per partition")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# What maintenance did to a number, lower being better for everything the chart shows (files,
# snapshots, manifests, metadata): fewer is green, unchanged grey, more (metadata that grew) red.
CHANGE_COLORS = {"fewer": "tab:green", "unchanged": "tab:gray", "more": "tab:red"}
BEFORE_COLOR = "tab:blue"


def before_after(before: Mapping[str, float], after: Mapping[str, float]) -> Figure:
    """One small linear panel per number, before and after maintenance, the after bar coloured by the change.

    Each number gets its own axis, so counts and MiB are never on one scale and a 0 is drawn as 0. The
    after bar is green where the number fell, grey where maintenance left it as it was, red where it
    grew (:data:`CHANGE_COLORS`), and labelled with the change.

    Args:
        before: Name → value before (e.g. data files, snapshots, manifests, metadata MiB).
        after: The same names after.

    Returns:
        The figure.
    """
    names = list(before)
    fig, axes = plt.subplots(1, len(names), figsize=(2.2 * len(names), 3.2), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        values = [float(before[name]), float(after[name])]
        change = "fewer" if values[1] < values[0] else "more" if values[1] > values[0] else "unchanged"
        bars = ax.bar(["before", "after"], values, color=[BEFORE_COLOR, CHANGE_COLORS[change]])
        ax.bar_label(bars, labels=[f"{value:g}" for value in values], fontsize=8)
        difference = values[1] - values[0]
        ax.set_title(f"{name}\n{change} ({difference:+.3g})" if difference else f"{name}\n{change}", fontsize=9)
        ax.margins(y=0.15)
    handles = [plt.Rectangle((0, 0), 1, 1, color=color) for color in (BEFORE_COLOR, *CHANGE_COLORS.values())]
    fig.legend(
        handles, ["before", *(f"after: {change}" for change in CHANGE_COLORS)], loc="lower center", ncol=4, fontsize=8
    )
    fig.suptitle("Table before and after maintenance (after: green fewer, grey unchanged, red more)")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig
