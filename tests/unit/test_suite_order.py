"""make test's workers start the test files in conftest's order (the longest kinds first).

pytest-xdist hands out the files with the most tests first unless told not to, and the notebook pass
(three tests, a third of the run's time) then started last and ran alone at the end.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from icestream.config import project_home

CONFTEST = """
def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: 0 if item.path.name == "test_long.py" else 1)
"""
# Plugins these ten tests do not need: nbval alone imports nbformat, 2 s of CPU in each of 3 processes.
QUIET_PLUGINS = ("-p", "no:cacheprovider", "-p", "no:nbval", "-p", "no:hypothesispytest", "-p", "no:anyio")
TEST = """
import os

def test_{index}():
    with open({log!r}, "a") as log:
        log.write(os.environ["PYTEST_XDIST_WORKER"] + " {module}\\n")
"""


def make_test_xdist_flags(workers: int) -> list[str]:
    """The pytest-xdist flags of ``make test``'s pytest line, as it runs them with ``workers`` workers."""
    recipe = (project_home() / "Makefile").read_text()
    line = next(line for line in recipe.splitlines() if "$(BIN)/pytest" in line and "TEST_WORKERS" in line)
    flags = re.search(r",(-n \$\(TEST_WORKERS\)[^)]*)\)", line)
    assert flags, line
    return flags.group(1).replace("$(TEST_WORKERS)", str(workers)).split()


def test_the_file_conftest_puts_first_is_the_first_its_worker_runs(tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for module, tests in (("long", 1), ("many", 6), ("some", 3)):  # the one long test has the fewest
        body = "".join(TEST.format(index=index, log=str(log), module=module) for index in range(tests))
        (tmp_path / f"test_{module}.py").write_text(body)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *QUIET_PLUGINS, *make_test_xdist_flags(2)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    runs = [line.split() for line in log.read_text().splitlines()]
    assert len(runs) == 10, runs
    worker = next(worker for worker, module in runs if module == "long")
    first = next(module for each, module in runs if each == worker)
    assert first == "long", f"{worker} ran {first} before the file conftest put first: {runs}"
