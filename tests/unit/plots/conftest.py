"""Every chart test starts and ends with no pyplot figure open, whatever ran before it in this worker."""

from __future__ import annotations

from collections.abc import Iterator

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest


@pytest.fixture(autouse=True)
def no_figure_left_open() -> Iterator[None]:
    # pyplot's figure list is global to the process, and xdist runs any mix of files in one worker.
    plt.close("all")
    yield
    plt.close("all")
