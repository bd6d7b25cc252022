"""README is an entry point a newcomer reads in minutes, and every link in it and in docs/ resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_LIMIT = 25_000  # bytes: the manual belongs in docs/
PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings (lower case, punctuation dropped, spaces to dashes)."""
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return found


def test_readme_is_an_entry_point_not_the_manual() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size:,} bytes: move detail into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


def bench_workbook():
    """bench/bench_workbook.py as a module: its README patterns are the one source of the format."""
    import importlib.util
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_workbook", ROOT / "bench" / "bench_workbook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_times_are_the_last_workbook_measurement() -> None:
    """README's time per notebook and for make run's notebooks are bench_workbook's last result, within
    a quarter, dated as it is; its table lists exactly the notebooks there are, as that result does."""
    import json

    bench = bench_workbook()
    result = json.loads((ROOT / "bench" / "results" / "workbook.json").read_text())
    measured = {Path(name).stem: stats["median"] for name, stats in result["notebooks_seconds"].items()}
    notebooks = sorted(path.stem for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    readme = (ROOT / "README.md").read_text()
    rows = [match for line in readme.splitlines() if (match := bench.README_ROW.match(line))]
    assert [row["name"] for row in rows] == notebooks == sorted(measured), "table, notebooks and result agree"
    far = {}
    for row in rows:
        shown = re.fullmatch(r"(\d+) s", row["seconds"].strip())
        if shown is None or abs(int(shown[1]) - measured[row["name"]]) > 0.25 * measured[row["name"]]:
            far[row["name"]] = (row["seconds"], round(measured[row["name"]], 1))
    assert not far, f"README's times against bench/results/workbook.json: {far}"
    total = bench.README_TOTAL.search(readme)
    assert total is not None, "README says how long make run's notebooks take, from the benchmark"
    assert abs(int(total["seconds"]) - result["total_seconds"]["median"]) <= 0.25 * result["total_seconds"]["median"]
    assert (total["date"], int(total["runs"])) == (
        result["machine"]["measured_at"][:10],
        result["total_seconds"]["runs"],
    )


def test_readme_times_are_written_from_a_result(tmp_path: Path) -> None:
    bench = bench_workbook()
    readme = tmp_path / "README.md"
    readme.write_text(
        "(**1 s** of notebooks after set-up, the median of 1 run of `bench/bench_workbook.py` on 2 cores, 2026-01-01)\n"
        "| # | notebook | what | time |\n|---|---|---|---|\n| 1 | `00_setup` | the lake | 9 s |\n"
        "| 2 | `01_produce_events` | events | 28–42 s |\n"
    )
    result = {
        "notebooks_seconds": {"00_setup.ipynb": {"median": 14.4}, "01_produce_events.ipynb": {"median": 20.6}},
        "total_seconds": {"median": 35.0, "runs": 2},
        "machine": {"cores": 2, "measured_at": "2026-11-27T03:00:00+00:00"},
    }
    bench.update_readme(result, readme)
    assert readme.read_text().splitlines() == [
        "(**35 s** of notebooks after set-up, the median of 2 runs of `bench/bench_workbook.py` "
        "on 2 cores, 2026-11-27)",
        "| # | notebook | what | time |",
        "|---|---|---|---|",
        "| 1 | `00_setup` | the lake | 14 s |",
        "| 2 | `01_produce_events` | events | 21 s |",
    ]


RUN_COMMAND = re.compile(r"icestream run ((?:[0-9]{2}\w*\s+)+)")


def test_the_schedules_run_the_ingest_and_the_table_health_notebooks() -> None:
    """docs/scheduling.md schedules two jobs, the ingest and table health: its commands name notebooks by
    number, which a split of the workbook changes (its health job once ran the continuous aggregate)."""
    from icestream.workbook.runner import notebook_paths

    commands = RUN_COMMAND.findall((ROOT / "docs" / "scheduling.md").read_text())
    run = {path.stem for names in commands for path in notebook_paths(names.split())}
    assert run == {"02_stream_ingest", "09_table_health"}, run
