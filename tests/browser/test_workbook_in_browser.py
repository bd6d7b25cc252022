"""The workbook in a real browser: Debian's Chromium, driven by Selenium, in JupyterLab started as ``make lab`` does.

Notebook 02 is opened from ``notebooks/`` and run through JupyterLab's own command ("Run All
Cells") while events flow into its stream; its live dashboard must change between two looks
while the ingest runs, and at the end no cell may show an error and every chart must have
rendered. ``make test`` installs ``chromium`` and ``chromium-driver`` with apt-get (``make browser``).
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from icestream.config import Settings, project_home
from tests.helpers.lab import Lab, running_lab
from tests.helpers.streams import event_payload, put
from tests.helpers.waiting import wait_until

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
NOTEBOOK = "02_stream_ingest.ipynb"
# A copy of 02 with its run bounded as a scheduled run would bound it (papermill's injected parameters).
PARAMETERS = {"run_seconds": 20.0, "trigger_seconds": 1.0}
ERROR_OUTPUT = '[data-mime-type="application/vnd.jupyter.error"]'

# The prompt of every code cell ("[3]:", "[*]:" while it runs, "[ ]:" before), and for the cell
# that runs the live dashboard: its prompt and the source of its newest image.
PROMPTS = """
return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell')].map(cell => {
  const image = cell.querySelector('.jp-OutputArea .jp-RenderedImage img');
  return {prompt: (cell.querySelector('.jp-InputPrompt') || {}).textContent || '',
          source: (cell.querySelector('.cm-content') || {}).textContent || '',
          image: image ? image.getAttribute('src') : null};
});
"""
IMAGES = """
return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedImage img')]
  .map(image => image.complete && image.naturalWidth > 0);
"""


@pytest.fixture
def browser() -> Iterator[object]:
    """Headless Chromium through chromedriver (both from Debian: Selenium's own download is not reachable)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    assert not missing, f"{', '.join(missing)} missing: `make browser` installs chromium and chromium-driver"
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def flowing(fresh) -> Iterator[Settings]:
    """A private stream and tables, and a thread sending 20 events every half second until the test ends."""
    settings = fresh(shards=2, prefix="browser")
    stop = threading.Event()

    def send() -> None:
        number = 0
        while not stop.is_set():
            put(settings, [(event_payload(number + i, f"u{(number + i) % 7}"), f"u{i}") for i in range(20)])
            number += 20
            stop.wait(0.5)

    sender = threading.Thread(target=send, name="browser-test-events", daemon=True)
    sender.start()
    try:
        yield settings
    finally:
        stop.set()
        sender.join(30)


def served_copy(root: Path) -> Path:
    """``root/notebooks`` holding a copy of the workbook, 02 with the injected parameters above.

    A copy, so that JupyterLab's autosave never writes outputs into the checkout's notebooks.
    """
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    # The notebooks only: kernels that run from notebooks/ meanwhile (the notebook tests) leave IPC sockets there.
    shutil.copytree(project_home() / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns("kernel-ipc-*"))
    path = root / "notebooks" / NOTEBOOK
    notebook = parameterize_notebook(load_notebook_node(str(path)), PARAMETERS)
    nbformat.write(notebook, path)
    return path


def run_all_cells(driver, lab: Lab) -> None:
    """Open 02 and run every cell through JupyterLab's command palette, as a learner would."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.get(lab.url(f"/lab/tree/notebooks/{NOTEBOOK}"))
    wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-CodeCell"), 120,
               interval=0.5, message="the notebook to open")  # fmt: skip

    def kernel_idle() -> bool:
        names = driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Toolbar-kernelName")
        status = driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Notebook-ExecutionIndicator")
        return (
            bool(names)
            and "Python (icestream)" in names[0].text
            and bool(status)
            and status[0].get_attribute("data-status") == "idle"
        )

    wait_until(kernel_idle, 120, interval=0.5, message="the icestream kernel to be idle")
    body = driver.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.CONTROL, Keys.SHIFT, "c")
    palette = wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, ".lm-CommandPalette-input"), 30,
                         interval=0.2, message="the command palette")[0]  # fmt: skip
    palette.send_keys("Run All Cells")
    wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, ".lm-CommandPalette-item.lm-mod-active"), 30,
               interval=0.2, message="the palette to offer Run All Cells")  # fmt: skip
    palette.send_keys(Keys.ENTER)


def test_notebook_02_runs_in_jupyterlab_and_its_live_dashboard_moves(browser, flowing, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    served_copy(tmp_path / "root")
    env = {"ICESTREAM_STREAM_NAME": flowing.stream_name, "ICESTREAM_TABLE": flowing.table}
    with running_lab(tmp_path / "root", tmp_path, env) as lab:
        run_all_cells(browser, lab)

        def dashboard() -> dict | None:
            cells = [cell for cell in browser.execute_script(PROMPTS) if "live_dashboard(" in cell["source"]]
            assert cells, "no cell of 02 calls live_dashboard"
            return cells[0] if cells[0]["image"] else None

        first = wait_until(dashboard, 300, interval=0.5, message="the live dashboard's first frame")
        second = wait_until(lambda: (look := dashboard()) and look["image"] != first["image"] and look, 120,
                            interval=0.5, message="the live dashboard to change")  # fmt: skip
        # Both looks were taken while the dashboard's cell ran (events flowing), not after it ended.
        assert first["prompt"].strip() == "[*]:", first["prompt"]
        assert second["prompt"].strip() == "[*]:", second["prompt"]

        def finished() -> list[dict] | None:
            prompts = browser.execute_script(PROMPTS)
            done = all(cell["prompt"].strip()[1:-2].isdigit() for cell in prompts)
            return prompts if done or browser.find_elements(By.CSS_SELECTOR, ERROR_OUTPUT) else None

        prompts = wait_until(finished, 600, interval=1, message="every cell of 02 to run")
        errors = [element.text[:2000] for element in browser.find_elements(By.CSS_SELECTOR, ERROR_OUTPUT)]
        assert not errors, errors
        assert all(cell["prompt"].strip()[1:-2].isdigit() for cell in prompts), [cell["prompt"] for cell in prompts]
        # Every chart cell drew, but for those that draw only when their data is there (``if ...``: the
        # batch charts of a run without batches, the freshness of live batches on a run without any).
        charts = [cell for cell in prompts if "plt.show()" in cell["source"] or "live_dashboard(" in cell["source"]]
        charts = [cell for cell in charts if not cell["source"].lstrip().startswith("if ")]
        assert len(charts) >= 2, [cell["source"][:80] for cell in charts]
        blank = [cell["source"][:120] for cell in charts if not cell["image"]]
        assert not blank, f"chart cells without a rendered image: {blank}"
        rendered = browser.execute_script(IMAGES)
        assert len(rendered) >= len(charts), (len(rendered), len(charts))
        assert all(rendered), rendered
