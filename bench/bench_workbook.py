"""The workbook end to end (item 7): ``make run``'s notebooks 00 → 07 after set-up, per notebook.

Set-up (the venv, Java, the jars) is done already, as after a first ``make run``; the benchmark starts
its own emulator in a fresh private environment (warehouse, run and output folders under
``bench/results/tmp/workbook/``) and runs every notebook headless with papermill through
``icestream.operations.runner.run_notebooks``, exactly as ``icestream run`` does, with the notebooks' default
parameters. Reported: wall seconds per notebook and in total (``--runs`` times; medians), against the
target from issue 5: 00 → 07 in under 5 minutes. Notebook 01 starts a background producer; it is
stopped at the end, with the emulator.

Run: ``.venv/bin/python bench/bench_workbook.py`` (about 4 minutes per run), or ``make bench``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import banner, bench_session, command_line, summary, write_results

TARGET_SECONDS = 300.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="end-to-end runs (each from a fresh environment)")
    parser.add_argument("notebooks", nargs="*", help="names or prefixes (default: all)")
    args = parser.parse_args()

    facts = banner("workbook: notebooks 00 -> 07 end to end", command_line())
    from icestream.operations.runner import notebook_paths, run_notebooks

    runs: list[dict[str, float]] = []
    for number in range(args.runs):
        with bench_session("workbook", spark=False) as (settings, _spark):
            output = settings.path("output_dir") / "notebooks"
            done = run_notebooks(notebook_paths(args.notebooks), output, progress=False)
            runs.append({run.notebook: run.seconds for run in done})
        total = sum(runs[-1].values())
        print(f"run {number + 1}: {total:.1f} s in all", flush=True)
    names = list(runs[0])
    per_notebook = {name: summary([run[name] for run in runs]) for name in names}
    totals = summary([sum(run.values()) for run in runs])
    for name in names:
        print(f"{name:28s} {per_notebook[name]['median']:7.1f} s")
    verdict = "met" if totals["median"] <= TARGET_SECONDS else "NOT met"
    print(f"{'total':28s} {totals['median']:7.1f} s; target < {TARGET_SECONDS:.0f} s: {verdict}")
    write_results(
        "workbook",
        {
            "machine": facts,
            "command": command_line(),
            "notebooks_seconds": per_notebook,
            "total_seconds": totals,
            "target_seconds": TARGET_SECONDS,
            "share_of_total": {name: per_notebook[name]["median"] / totals["median"] for name in names},
            "median_notebook_seconds": statistics.median(per_notebook[name]["median"] for name in names),
        },
    )


if __name__ == "__main__":
    main()
