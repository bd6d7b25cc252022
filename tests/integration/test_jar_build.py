"""The real jar build: relocate pyspark's Jackson into Iceberg's shaded package (needs java + jarjar)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from icestream.config import load_settings
from icestream.runtime import jars


def test_build_from_the_pinned_wheel(tmp_path: Path) -> None:
    """The real build: relocate pyspark's Jackson into Iceberg's shaded package (needs java + jarjar)."""
    settings = load_settings(jar_cache_dir=str(tmp_path / "cache"))
    plan = jars.iceberg_plan(settings)
    assert plan.source == "built from wheel"
    runtime, jackson = plan.jars
    assert runtime.name == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    with zipfile.ZipFile(jackson) as archive:
        names = set(archive.namelist())
    assert set(jars.JACKSON_MARKERS) <= names
    assert "org/apache/iceberg/shaded/com/fasterxml/jackson/databind/ObjectMapper.class" in names
    assert not any(name.startswith("com/fasterxml/") for name in names), "every class must be relocated"
    assert not any(name.endswith("module-info.class") for name in names)
    assert 1_000_000 < jackson.stat().st_size < 5_000_000
    assert jars.iceberg_plan(settings).source == "cache"  # built once, then reused
