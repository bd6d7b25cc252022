"""What an executed notebook shows a reader, checked for the defects a learner trips on.

The outputs (tables as pandas renders them, printed text) are scanned for: counts printed as floats
(``35019.0`` under a count-like column), epoch numbers where a time belongs (``timestamp_micros(...)``
with a number, a bound value of an echoed statement, a number in a ``*_ts``/``*_at`` column), pandas'
``NaN``, ``NaT`` and ``<NA>`` for a missing value (a null reads as None), and a bare "Empty DataFrame".
Each finding names the notebook's cell, so a test failure says where to look.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from itertools import zip_longest
from pathlib import Path

COUNT_WORDS = ("records", "events", "rows", "batches", "count", "files", "anomalies", "added", "rejected",
               "written", "read", "snapshots", "batch_id", "sessions", "users", "commits", "calls", "sent",
               "failed", "retried", "throttled", "deduplicated", "replayed", "manifests")  # fmt: skip
NOT_COUNTS = ("per", "/s", "median", "avg", "mean", "rate", "ratio", "share", "%")  # measures, fractional by nature
TIME_SUFFIXES = ("_ts", "_at", " at", "time", "created", "arrival")
FLOAT_COUNT = re.compile(r"^-?\d[\d,]*\.0+$")
EPOCH = re.compile(r"^1[5-9]\d{8}(\d{3}|\d{6})?(\.\d+)?$")  # seconds, millis or micros since 2017
EPOCH_CALL = re.compile(r"timestamp_(micros|millis|seconds)\(\d+\)")
# An echoed statement's bound value that is an epoch number with no readable time after it
# (``-- bound: :since = 1796224800``, not ``:since = 1796224800 (2026-12-02 15:20:00 UTC)``).
EPOCH_BOUND = re.compile(r"([:$]\w+) = (1[5-9]\d{8}(?:\d{3}|\d{6})?)\b(?! \()")
PANDAS_NULLS = ("NaN", "NaT", "<NA>")


class _Tables(HTMLParser):
    """The header and body cells of every ``<table>`` pandas rendered."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[list[str], list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._row: list[str] = []
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "thead":
            self._in_head = False
        elif tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self.tables:
            header, body = self.tables[-1]
            if self._in_head:  # a later header row (the index's name, a column level) fills the gaps of the first
                header[:] = [later or earlier for earlier, later in zip_longest(header, self._row, fillvalue="")]
            else:
                body.append(self._row)

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _table_findings(html: str) -> list[str]:
    parser = _Tables()
    parser.feed(html)
    found = []
    for header, body in parser.tables:
        for row in body:
            # A row starts with its index cell (<th>); the header names the index column too.
            cells = dict(zip(header, row, strict=False)) if len(header) == len(row) else {}
            for column, value in cells.items():
                name = column.lower()
                if value in PANDAS_NULLS:
                    found.append(f"{value} in column {column!r}")
                elif (
                    FLOAT_COUNT.match(value)
                    and any(word in name for word in COUNT_WORDS)
                    and not any(word in name for word in NOT_COUNTS)
                ):
                    found.append(f"count {value} as a float in column {column!r}")
                elif EPOCH.match(value) and name.endswith(TIME_SUFFIXES):
                    found.append(f"epoch number {value} in time column {column!r}")
    return found


def output_defects(path: Path) -> list[str]:
    """Every defect in the outputs of the executed notebook at ``path``, as ``"<name>[cell]: what"``."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    defects = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            texts = [output.get("text", ""), data.get("text/plain", "")]
            findings = _table_findings(data["text/html"]) if "text/html" in data else []
            for text in texts:
                text = "".join(text) if isinstance(text, list) else text
                if text.lstrip().startswith("Empty DataFrame"):
                    findings.append("a bare empty frame")
                findings += [f"an epoch number in {match.group(0)}" for match in EPOCH_CALL.finditer(text)]
                bound = [line for line in text.splitlines() if line.startswith("-- bound:")]
                findings += [f"an epoch number bound: {match.group(0)}" for line in bound
                             for match in EPOCH_BOUND.finditer(line)]  # fmt: skip
            defects += [f"{path.name}[{index}]: {finding}" for finding in findings]
    return defects


def output_lines(path: Path) -> int:
    """The lines a reader scrolls past in the outputs of the executed notebook at ``path``, as JupyterLab shows them.

    Each stream output's text lines; a table (a display or result output with an HTML ``<table>``, as a
    DataFrame shows) its rows, header rows included, since JupyterLab renders the HTML and not the
    ``text/plain`` copy, which pandas wraps at 80 characters into two to four times as many lines; any
    other display or result output its ``text/plain`` lines; an output with an image one line (a chart
    is one thing to look at, whatever its text says). Markdown and code are not outputs.
    """
    import json
    import re

    lines = 0
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            if "text" in output:
                lines += len(_joined(output["text"]).splitlines())
            elif "data" in output:
                data = output["data"]
                html = _joined(data.get("text/html", ""))
                if "image/png" in data:
                    lines += 1
                elif "<table" in html:
                    lines += len(re.findall(r"<tr[\s>]", html))
                else:
                    lines += len(_joined(data.get("text/plain", "")).splitlines())
    return lines


def _joined(text: str | list[str]) -> str:
    """A notebook text field, saved as one string or as a list of lines."""
    return "".join(text) if isinstance(text, list) else text
