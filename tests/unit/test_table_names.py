"""Every table the workbook uses is named in one place: ``icestream.config`` (Settings and its suffixes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from icestream.config import COPY_SUFFIXES, load_settings
from icestream.errors import ConfigError
from icestream.workbook.reset import workbook_tables

PACKAGE = Path(__file__).resolve().parents[2] / "lib" / "icestream"


def test_companion_tables_are_named_from_the_table_setting() -> None:
    settings = load_settings(catalog="lake", namespace="ns", table="clicks")
    assert settings.table_name == "lake.ns.clicks"
    assert settings.rejects_table_name == "lake.ns.clicks_rejects"
    assert settings.archive_table_name == "lake.ns.clicks_raw"
    assert settings.metrics_table_name == "lake.ns.clicks_metrics"
    assert settings.companion_table_name("time_travel") == "lake.ns.clicks_time_travel"
    assert settings.companion("layout_demo").table == "clicks_layout_demo"


def test_reset_drops_the_tables_config_names() -> None:
    settings = load_settings(catalog="lake", namespace="ns", table="clicks")
    assert workbook_tables(settings) == (
        "lake.ns.clicks",
        "lake.ns.clicks_rejects",
        "lake.ns.clicks_raw",  # the raw archive: kept, it mixed the records of the stream before and after
        "lake.ns.clicks_metrics",
        *(f"lake.ns.clicks_{suffix}" for suffix in COPY_SUFFIXES),
    )


def test_a_suffix_that_makes_no_identifier_is_refused() -> None:
    with pytest.raises(ConfigError):
        load_settings(table="clicks").companion("no-dashes")


# A table name built by hand from the settings (f"{settings.table}_x", f"{catalog}.{namespace}.{...}") is a
# second source of truth: the day one changes, the other names a table nobody writes.
BUILT_BY_HAND = re.compile(r"\{[\w.]*\btable\}_|\{[\w.]*\bcatalog\}\.\{[\w.]*\bnamespace\}\.\{")


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_module_but_config_builds_a_table_name(path: Path) -> None:
    if path.name == "config.py" and path.parent == PACKAGE:
        return
    built = [line.strip() for line in path.read_text().splitlines() if BUILT_BY_HAND.search(line)]
    assert not built, f"{path.name} builds a table name itself; use Settings.companion_table_name: {built}"
