"""The figures the reliability campaigns measure: one registry per test session, printed as a table at the end."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

FIGURES_FILE = "reliability_figures.json"
FULL = os.environ.get("ICESTREAM_RELIABILITY", "").lower() == "full"


def size(bounded: int, full: int) -> int:
    """A campaign size: small in ``make test``, large in ``make reliability`` (ICESTREAM_RELIABILITY=full)."""
    return full if FULL else bounded


_lock = threading.Lock()
_rows: list[dict[str, Any]] = []
_meta: dict[str, Any] = {}


def record(campaign: str, case: str, **figures: Any) -> None:
    """Add one row: a campaign (crash, faults, ...), a case (a fault kind, a trial set) and its figures."""
    with _lock:
        _rows.append({"campaign": campaign, "case": case, **figures})


def set_meta(**values: Any) -> None:
    """Session facts shown with the table (mode, run folder)."""
    _meta.update(values)


def rows() -> list[dict[str, Any]]:
    """The rows recorded so far."""
    with _lock:
        return list(_rows)


def render(table_rows: list[dict[str, Any]]) -> list[str]:
    """The rows as a plain-text table; each campaign's columns are the union of its rows' figures."""
    lines: list[str] = []
    for campaign in dict.fromkeys(row["campaign"] for row in table_rows):
        group = [row for row in table_rows if row["campaign"] == campaign]
        columns = ["case", *dict.fromkeys(key for row in group for key in row if key not in ("campaign", "case"))]
        cells = [[str(row.get(column, "")) for column in columns] for row in group]
        widths = [max(len(column), *(len(cell[index]) for cell in cells)) for index, column in enumerate(columns)]
        lines.append(f"{campaign}:")
        lines.append("  " + "  ".join(column.ljust(width) for column, width in zip(columns, widths, strict=True)))
        lines.extend(
            "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in cells
        )
    return lines


def write(run_dir: Path) -> Path:
    """Save the figures as JSON in ``run_dir`` so the numbers quoted in the README can be traced."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / FIGURES_FILE
    path.write_text(json.dumps({"meta": _meta, "rows": rows()}, indent=2, default=str))
    return path
