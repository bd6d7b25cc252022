"""A cross-reference in a notebook's text names a notebook there is, and the one that holds the topic.

The notebooks point at each other as `` `07` ``, ``07's`` or ``notebook 07``. When a notebook is
inserted, the numbers after it move and such a pointer goes on naming a notebook, only the wrong
one (issue 40: 00 sent the reader to 06 for compaction, which 07 holds). A topic is recognised by
its words in the clause around the pointer; a clause about a topic must point at the notebook
that holds it. Notebooks are named by their topic (``07_table_health``), so the rule survives
renumbering.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# `07` (not a value: "set `retain_last` to `10`"), notebook 07, 07's, (07), by 07, 07 does / compacts / ...
REFERENCE = re.compile(
    r"(?<!to )(?<!or )(?<!= )`(\d\d)`|\bnotebooks? `?(\d\d)\b|(?<![\w:.\-])(\d\d)'s\b|\((\d\d)\)|\bby (\d\d)\b"
    r"|(?<![\w:.\-`])(\d\d)\s(?=does\b|do\b|did\b|compact|shows?\b|runs?\b|reads?\b|scores?\b|wrote\b|writes\b)"
)
CLAUSE = re.compile(r"\.\s|;|\n\n|\n-\s|:\s|,\s|\sand\s|\sbut\s| — | - ")  # lines wrap inside a clause
TOPICS = (  # words of a topic -> the notebook (its name without the number) that holds it
    (re.compile(r"\bcompact|\bexpir|\borphan|\bmaintenance", re.IGNORECASE), "table_health"),
    (re.compile(r"\bscores?\b|\bscored\b|\bfinds? (it|them)\b|\bdetects?\b", re.IGNORECASE), "anomaly_detection"),
    (re.compile(r"time travel|time-travel|\bAS OF\b"), "time_travel"),
    (re.compile(r"merge-on-read|copy-on-write|keyed tables?", re.IGNORECASE), "row_level_changes"),
    (re.compile(r"readStream|Structured Streaming|watermark"), "structured_streaming"),
)


def wrong_references(folder: Path) -> list[str]:
    """Every pointer to a notebook that does not exist or does not hold the topic of its clause."""
    topics = {path.name[:2]: path.stem[3:] for path in folder.glob("[0-9][0-9]_*.ipynb")}
    wrong = []
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for index, cell in enumerate(cells):
            if cell["cell_type"] != "markdown":
                continue
            for clause in (" ".join(part.split()) for part in CLAUSE.split("".join(cell["source"]))):
                named = [next(group for group in match.groups() if group) for match in REFERENCE.finditer(clause)]
                named = [number for number in named if number != path.name[:2]]
                wrong += [f"{path.name}[{index}]: no notebook {number}: {clause.strip()}" for number in named
                          if number not in topics]  # fmt: skip
                for words, holder in TOPICS:
                    about = words.search(clause) and path.stem[3:] != holder
                    if named and about and not any(topics.get(number) == holder for number in named):
                        wrong.append(f"{path.name}[{index}]: {named} for the {holder} notebook: {clause.strip()}")
    return wrong


def test_cross_references_name_the_notebook_that_holds_the_topic() -> None:
    wrong = wrong_references(ROOT / "notebooks")
    assert not wrong, "\n".join(wrong)


def test_a_reference_left_behind_by_an_insertion_is_found(tmp_path: Path) -> None:
    def notebook(name: str, text: str) -> None:
        cells = [{"cell_type": "markdown", "metadata": {}, "source": [text]}]
        (tmp_path / name).write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))

    notebook("00_setup.ipynb", "Small files are why `06` compacts them; `04` reads it `AS OF` a snapshot.")
    notebook("05_schema_evolution.ipynb", "Once snapshots are expired (06 does), a `replace` for a compaction by 06.")
    notebook("04_time_travel.ipynb", "Set `copy_appends` to `10`.")
    notebook("06_anomaly_detection.ipynb", "# 06")
    notebook("07_table_health.ipynb", "Iceberg 1.10's names; see `09`.")
    assert wrong_references(tmp_path) == [
        "00_setup.ipynb[0]: ['06'] for the table_health notebook: Small files are why `06` compacts them",
        "05_schema_evolution.ipynb[0]: ['06'] for the table_health notebook: Once snapshots are expired (06 does)",
        "05_schema_evolution.ipynb[0]: ['06'] for the table_health notebook: a `replace` for a compaction by 06.",
        "07_table_health.ipynb[0]: no notebook 09: see `09`.",
    ]


SAVED_NAME = re.compile(r"""["'](\d\d)_[\w.-]+\.(?:png|json|jsonl|csv|parquet)["']""")


def wrong_file_names(folder: Path) -> list[str]:
    """A file a notebook names with another notebook's number that that notebook never names.

    A notebook reads what another saved (03 reads ``02_ingest_summary.json``), so a file named with
    another's number is fine when that notebook writes it; 09 saving its charts as ``07_*.png`` after
    the renumbering was not.
    """
    code = {
        path.name[:2]: "".join(
            "".join(cell["source"]) for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"
        )
        for path in sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    }
    return [
        f"{number}: {match.group(0)}"
        for number, text in code.items()
        for match in SAVED_NAME.finditer(text)
        if match.group(1) != number and match.group(0)[1:-1] not in code.get(match.group(1), "")
    ]


def test_a_file_a_notebook_names_carries_the_number_of_the_notebook_that_writes_it() -> None:
    wrong = wrong_file_names(ROOT / "notebooks")
    assert not wrong, "\n".join(wrong)
