"""``icestream run``: the notebooks headless, with papermill."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from icestream.cli.common import settings_from


def _parameters(pairs: list[list[str]] | None) -> dict[str, Any]:
    # Values are read as YAML scalars, as papermill's -p does: 4 is an int, true a bool, null None.
    # Anything else YAML would make of it (a date, a list) stays the string that was typed: the
    # notebooks' parameters are literals, and papermill must write them into the notebook as JSON.
    return {name: _scalar(value) for name, value in (pairs or [])}


def _scalar(text: str) -> Any:
    value = yaml.safe_load(text)
    return value if value is None or isinstance(value, bool | int | float | str) else text


def cmd_run(args: argparse.Namespace) -> int:
    """Run notebooks headless with papermill."""
    from icestream.workbook.runner import NotebookFailedError, notebook_arguments, notebook_paths, run_notebooks

    settings = settings_from(args)
    notebooks = notebook_paths(args.notebooks)
    output = Path(args.output) if args.output else settings.path("output_dir")
    parameters = _parameters(args.parameter)
    notebook_arguments(notebooks, parameters)  # a typo is refused before the parameters line, as run_notebooks would
    try:
        started = datetime.now(UTC) if args.stamp else None
        if parameters:
            print(f"parameters: {', '.join(f'{name}={value!r}' for name, value in parameters.items())}")
        runs = run_notebooks(
            notebooks,
            output,
            parameters,
            progress=not args.no_progress,
            started=started,
            kernel_per_notebook=args.kernel_per_notebook,
        )
    except NotebookFailedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print("\nwall time per notebook:")
    for run in runs:
        print(f"  {run.notebook:<32} {run.seconds:7.1f} s   {run.output.name}")
    print(f"  {'total':<32} {sum(run.seconds for run in runs):7.1f} s   (executed copies in {output})")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to the ``icestream`` parser."""
    run = commands.add_parser("run", help="run notebooks headless with papermill")
    run.add_argument("notebooks", nargs="*", help="names or prefixes (default: all, in order)")
    run.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        metavar=("NAME", "VALUE"),
        help="passed to every notebook that declares it; a name none declares is refused",
    )
    run.add_argument("--output", help="folder for executed copies (default: output/)")
    run.add_argument("--no-progress", action="store_true", help="no per-cell progress bar")
    run.add_argument(
        "--kernel-per-notebook",
        action="store_true",
        help="a kernel (and Spark driver) per notebook, as JupyterLab opens them; default: one, reset between",
    )
    run.add_argument(
        "--stamp",
        action="store_true",
        help="name each executed copy <notebook>-<UTC start>.ipynb, so every (scheduled) run keeps its own",
    )
    run.set_defaults(handler=cmd_run)
