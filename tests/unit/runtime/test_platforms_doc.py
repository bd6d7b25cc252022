"""docs/platforms.md's version table is the module's table."""

from __future__ import annotations

from icestream.config import project_home
from icestream.runtime.platforms import PLATFORMS


def test_the_docs_table_is_the_modules_table() -> None:
    text = (project_home() / "docs" / "platforms.md").read_text()
    table = text.split("<!-- platforms-table:start -->")[1].split("<!-- platforms-table:end -->")[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in table.strip().splitlines()[2:]]
    expected = [
        [row.service, row.release, row.spark, row.iceberg, ", ".join(row.python),
         "yes" if row.supported else f"no (Spark {'.'.join(row.spark.split('.')[:2])})", row.source]
        for row in PLATFORMS
    ]  # fmt: skip
    assert rows == expected
