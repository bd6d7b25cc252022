"""The workbook end to end: ``make run``'s notebooks after set-up, per notebook, and what each asks of a reader.

Set-up (the venv, Java, the jars) is done already, as after a first ``make run``; every run starts
its own emulator and Kafka broker in a fresh private environment (warehouse, run and output folders under
``bench/results/tmp/workbook/``) and runs every notebook headless with papermill through
``icestream.workbook.runner.run_notebooks``, exactly as ``icestream run`` does (one kernel and
Spark driver for the run, reset between notebooks), with the notebooks' default parameters.
The baseline, measured in the same invocation, is the same run with a kernel per notebook
(``icestream run --kernel-per-notebook``, as every run was before the shared kernel).

Reported: wall seconds per notebook and in total (medians of ``--runs``), against the target of
issue 40 (the sequence in at most 300 s, no notebook over 45 s but the live ingest's 90 s); and
per notebook what a reader reads: cells, words of markdown, lines of code and lines of output
(as JupyterLab shows them: text lines, a table's rows, a chart once).

``--update-readme`` writes the measured times into README's notebook table and its sentence on
``make run`` (``tests/unit/test_docs.py`` fails when they and this result disagree by more than a
quarter).

Run: ``.venv/bin/python bench/bench_workbook.py --runs 2`` (about 6 minutes per run and 7 per
baseline run on 2 cores), or ``make bench``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # the project: tests.helpers' line rule

from common import BENCH, banner, bench_session, command_line, summary, write_results

from tests.helpers.notebook_text import output_lines

TARGET_SECONDS = 300.0
NOTEBOOK_LIMIT_SECONDS = 45.0
LIVE_INGEST_LIMIT_SECONDS = 90.0  # 02: the ingest's live run and its crash demo
LIVE_INGEST = "02_stream_ingest.ipynb"
README = BENCH.parent / "README.md"
# README's notebook table: "| 3 | `02_stream_ingest` | what you learn ... | 85 s |"
README_ROW = re.compile(r"^(\| \d+ \| `(?P<name>\d\d_\w+)` \|.*\| )(?P<seconds>[^|]*)( \|)$")
# README's sentence on make run: "(**300 s** of notebooks after set-up, the median of 2 runs of ..., 2026-11-27)"
README_TOTAL = re.compile(
    r"\(\*\*(?P<seconds>\d+) s\*\* of notebooks after set-up, the median of (?P<runs>\d+) runs? of "
    r"`bench/bench_workbook\.py` on (?P<cores>\d+) cores, (?P<date>\d{4}-\d\d-\d\d)\)"
)


def reading(copy: Path) -> dict[str, int]:
    """What an executed notebook asks of a reader: cells, markdown words, code lines, output lines, charts."""
    notebook = json.loads(copy.read_text())
    figures = {"cells": len(notebook["cells"]), "markdown_words": 0, "code_lines": 0, "output_lines": 0, "charts": 0}
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            figures["markdown_words"] += len(source.split())
            continue
        figures["code_lines"] += len([line for line in source.splitlines() if line.strip()])
        figures["charts"] += sum("image/png" in output.get("data", {}) for output in cell.get("outputs", []))
    # As JupyterLab shows them, by the rule the workbook's budget is checked with (test_run_notebooks).
    figures["output_lines"] = output_lines(copy)
    return figures


def run_once(
    notebooks: list[str], kernel_per_notebook: bool
) -> tuple[dict[str, float], dict[str, dict[str, int]], dict[str, Any]]:
    """One run of the notebooks in a fresh environment: seconds and reading figures per notebook, and
    what 02 saved of its batches (the backlog apart from the live ones)."""
    from icestream.workbook.runner import notebook_paths, run_notebooks

    with bench_session("workbook", spark=False, write_limits=True, kafka=True) as (settings, _spark):  # as make run's
        output = settings.path("output_dir") / "notebooks"
        done = run_notebooks(notebook_paths(notebooks), output, progress=False, kernel_per_notebook=kernel_per_notebook)
        saved = settings.path("run_dir") / "02_ingest_summary.json"
        ingest = json.loads(saved.read_text()) if saved.exists() else {}
    batches = {key: ingest.get(key) for key in ("backlog_batches", "live_batches", "lag_after_s")}
    return {run.notebook: run.seconds for run in done}, {run.notebook: reading(run.output) for run in done}, batches


def over_limit(per_notebook: dict[str, dict[str, float]]) -> list[str]:
    """The notebooks whose median is over their limit."""
    return [
        name
        for name, stats in per_notebook.items()
        if stats["median"] > (LIVE_INGEST_LIMIT_SECONDS if name == LIVE_INGEST else NOTEBOOK_LIMIT_SECONDS)
    ]


def update_readme(result: dict[str, Any], readme: Path = README) -> None:
    """Write the measured times into README's notebook table and its sentence on ``make run``."""
    seconds = {Path(name).stem: stats["median"] for name, stats in result["notebooks_seconds"].items()}
    lines = []
    for line in readme.read_text().splitlines():
        row = README_ROW.match(line)
        if row and row["name"] in seconds:
            line = f"{row.group(1)}{seconds[row['name']]:.0f} s{row.group(4)}"
        lines.append(line)
    text = "\n".join(lines) + "\n"
    total = (
        f"(**{result['total_seconds']['median']:.0f} s** of notebooks after set-up, the median of "
        f"{result['total_seconds']['runs']} run{'s' if result['total_seconds']['runs'] != 1 else ''} of "
        f"`bench/bench_workbook.py` on {result['machine']['cores']} cores, {result['machine']['measured_at'][:10]})"
    )
    text, found = README_TOTAL.subn(total, text)
    assert found == 1, "README's sentence on make run's time is missing"
    readme.write_text(text)
    print(f"README:   times written from {result['machine']['measured_at'][:10]}'s result")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=1, help="runs with the shared kernel (each from a fresh environment)"
    )
    parser.add_argument("--baseline-runs", type=int, default=1, help="runs with a kernel per notebook (0: none)")
    parser.add_argument("--update-readme", action="store_true", help="write the times into README.md")
    parser.add_argument("notebooks", nargs="*", help="names or prefixes (default: all)")
    args = parser.parse_args()

    facts = banner("workbook: every notebook end to end", command_line())
    runs, baseline, figures, ingests = [], [], {}, []
    for number in range(args.runs):
        seconds, figures, batches = run_once(args.notebooks, kernel_per_notebook=False)
        runs.append(seconds)
        ingests.append(batches)
        print(f"run {number + 1} (one kernel): {sum(seconds.values()):.1f} s in all; 02: {batches}", flush=True)
    for number in range(args.baseline_runs):
        seconds, _, _ = run_once(args.notebooks, kernel_per_notebook=True)
        baseline.append(seconds)
        print(f"baseline run {number + 1} (a kernel per notebook): {sum(seconds.values()):.1f} s in all", flush=True)
    names = list(runs[0])
    per_notebook = {name: summary([run[name] for run in runs]) for name in names}
    totals = summary([sum(run.values()) for run in runs])
    result: dict[str, Any] = {
        "machine": facts,
        "command": command_line(),
        "notebooks_seconds": per_notebook,
        "total_seconds": totals,
        "target_seconds": TARGET_SECONDS,
        "over_limit": over_limit(per_notebook),
        "median_notebook_seconds": statistics.median(per_notebook[name]["median"] for name in names),
        "reading": figures,
        "ingest_batches": ingests,  # 02's per run: issue 40 asks for at least 10 live batches
    }
    if baseline:
        result["baseline_notebooks_seconds"] = {name: summary([run[name] for run in baseline]) for name in names}
        result["baseline_total_seconds"] = summary([sum(run.values()) for run in baseline])
        result["ratio_to_baseline"] = totals["median"] / result["baseline_total_seconds"]["median"]
    print(f"{'notebook':28s} {'s':>7s} {'baseline':>9s} {'cells':>6s} {'words':>6s} {'code':>5s} {'output':>7s}")
    for name in names:
        before = result.get("baseline_notebooks_seconds", {}).get(name, {}).get("median", float("nan"))
        read = figures[name]
        print(
            f"{name:28s} {per_notebook[name]['median']:7.1f} {before:9.1f} {read['cells']:6d} "
            f"{read['markdown_words']:6d} {read['code_lines']:5d} {read['output_lines']:7d}"
        )
    verdict = "met" if totals["median"] <= TARGET_SECONDS and not result["over_limit"] else "NOT met"
    ratio = f", {result['ratio_to_baseline']:.2f}x the baseline" if baseline else ""
    print(f"{'total':28s} {totals['median']:7.1f} s{ratio}; target <= {TARGET_SECONDS:.0f} s, limits: {verdict}")
    write_results("workbook", result)
    if args.update_readme:
        update_readme(result)


if __name__ == "__main__":
    main()
