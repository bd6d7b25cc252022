"""The Iceberg layout primer's diagram (notebook 00): a table's files as boxes, each pointing at the next level."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure
    from matplotlib.text import Text

LEVEL_ORDER = ("catalog", "metadata file", "manifest list", "manifest", "data file")
MAX_BOXES_PER_LEVEL = 6  # beyond this a level shows "+ N more", so a big table's diagram stays readable


def short_name(name: str, keep: int = 14) -> str:
    """A file name shortened for a box: its start, an ellipsis and its extension."""
    if len(name) <= keep + 8:
        return name
    stem, dot, extension = name.partition(".")
    return f"{stem[:keep]}….{extension}" if dot else f"{name[:keep]}…"


def layout_diagram(nodes: pd.DataFrame, title: str) -> Figure:
    """Boxes for the files of a snapshot, one column per level, arrows from each file to those it lists.

    Args:
        nodes: ``level``, ``name``, ``parent``, ``records`` (``TableLayout.nodes``).
        title: Chart title.

    Returns:
        The figure.
    """
    import matplotlib.pyplot as plt

    shown: dict[str, Text] = {}
    per_level = [nodes[nodes["level"] == level] for level in LEVEL_ORDER]
    rows = max(1, *(min(len(level), MAX_BOXES_PER_LEVEL + 1) for level in per_level))
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.75 * rows))
    for column, level_nodes in enumerate(per_level):
        boxes = list(level_nodes.itertuples())
        hidden = len(boxes) - MAX_BOXES_PER_LEVEL if len(boxes) > MAX_BOXES_PER_LEVEL else 0
        boxes = boxes[: MAX_BOXES_PER_LEVEL if hidden else len(boxes)]
        count = len(boxes) + (1 if hidden else 0)
        for row, node in enumerate(boxes):
            y = (rows - 1) / 2 - (row - (count - 1) / 2)
            if node.level == "catalog":  # "lake (jdbc): ns.table" → the catalog over the table's own name
                catalog, _, identifier = str(node.name).partition(": ")
                label = f"{catalog}\n{identifier.rsplit('.', 1)[-1]}"
            else:
                label = short_name(str(node.name))
            if node.level == "data file" and node.records is not None:
                label += f"\n{int(cast('float', node.records))} rows"  # a count (float beside nulls)
            box = ax.text(
                column,
                y,
                label,
                ha="center",
                va="center",
                fontsize=7,
                bbox={"boxstyle": "round", "facecolor": f"C{column}", "alpha": 0.25},
            )
            shown[str(node.name)] = box
            parent = shown.get(str(node.parent)) if node.parent is not None else None
            if parent is not None:
                # From the parent's right edge to the child's left edge, whatever the labels' widths.
                ax.annotate(
                    "",
                    xy=(0, 0.5),
                    xycoords=box,
                    xytext=(1, 0.5),
                    textcoords=parent,
                    arrowprops={"arrowstyle": "->", "color": "grey", "shrinkA": 6, "shrinkB": 6},
                )
        if hidden:
            y = (rows - 1) / 2 - (len(boxes) - (count - 1) / 2)
            ax.text(column, y, f"+ {hidden} more", ha="center", va="center", fontsize=7, color="grey")
    for column, level in enumerate(LEVEL_ORDER):
        ax.text(
            column,
            rows - 0.35,
            f"{level}\n({len(per_level[column])})",
            ha="center",
            va="bottom",
            fontsize=9,
            fontweight="bold",
        )
    ax.set(xlim=(-0.5, len(LEVEL_ORDER) - 0.5), ylim=(-0.6, rows + 0.4), title=title)
    ax.axis("off")
    fig.tight_layout()
    return fig
