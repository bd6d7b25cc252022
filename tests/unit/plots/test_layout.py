"""The layout primer's diagram: a box per file up to a cap, then '+ N more'."""

from __future__ import annotations

import matplotlib
import pandas as pd

from icestream.plots.layout import MAX_BOXES_PER_LEVEL, layout_diagram, short_name

matplotlib.use("Agg")


def nodes(data_files: int) -> pd.DataFrame:
    rows = [
        ("catalog", "lake (jdbc): ns.t", None, None),
        ("metadata file", "00001-abc.metadata.json", "lake (jdbc): ns.t", None),
        ("manifest list", "snap-1-1-abc.avro", "00001-abc.metadata.json", None),
        ("manifest", "abc-m0.avro", "snap-1-1-abc.avro", None),
    ]
    rows += [("data file", f"0000{i}-file.parquet", "abc-m0.avro", 10) for i in range(data_files)]
    return pd.DataFrame(rows, columns=["level", "name", "parent", "records"])


def test_short_names_keep_the_start_and_the_extension() -> None:
    assert short_name("00002-4d9a8d6c-98a2-448b-a3dc-631a1dd34817.metadata.json") == "00002-4d9a8d6c….metadata.json"
    assert short_name("v3.metadata.json") == "v3.metadata.json"


def test_every_file_gets_a_box_and_a_big_level_is_capped() -> None:
    import matplotlib.pyplot as plt

    small = layout_diagram(nodes(3), "small")
    labels = [text.get_text() for text in small.axes[0].texts]
    assert sum(label.endswith("10 rows") for label in labels) == 3
    assert not any("more" in label for label in labels)
    big = layout_diagram(nodes(MAX_BOXES_PER_LEVEL + 4), "big")
    labels = [text.get_text() for text in big.axes[0].texts]
    assert sum(label.endswith("10 rows") for label in labels) == MAX_BOXES_PER_LEVEL
    assert "+ 4 more" in labels
    assert f"data file\n({MAX_BOXES_PER_LEVEL + 4})" in labels
    plt.close("all")


def test_arrows_run_between_boxes_never_through_a_label() -> None:
    import matplotlib.pyplot as plt
    from matplotlib.text import Annotation

    figure = layout_diagram(nodes(3), "arrows")
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    arrows = [child for child in figure.axes[0].get_children() if isinstance(child, Annotation)]
    assert len(arrows) == 6  # metadata file, manifest list, manifest and three data files each have a parent
    for arrow in arrows:
        line = arrow.arrow_patch.get_window_extent(renderer)
        parent = arrow.anncoords.get_bbox_patch().get_window_extent(renderer)
        child = arrow.xycoords.get_bbox_patch().get_window_extent(renderer)
        between = (arrow.anncoords.get_text(), arrow.xycoords.get_text())
        assert parent.x1 <= line.x0 + 1, between
        assert line.x1 <= child.x0 + 1, between
    plt.close(figure)
