"""The real provisioning: the pinned wheel's runtime jar, copied into the cache, is all Iceberg needs."""

from __future__ import annotations

import filecmp
from pathlib import Path

from icestream.config import load_settings
from icestream.runtime import jars


def test_the_runtime_jar_is_copied_from_the_pinned_wheel_and_reused(tmp_path: Path) -> None:
    settings = load_settings(jar_cache_dir=str(tmp_path / "cache"), catalog_type="hadoop")
    plan = jars.iceberg_plan(settings)
    assert plan.source == "copied from wheel"
    (runtime,) = plan.jars  # one jar: no relocated Jackson beside it
    assert runtime == tmp_path / "cache" / "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    assert filecmp.cmp(runtime, jars.wheel_jar_folder() / runtime.name, shallow=False)
    assert jars.missing_classes(runtime) == []
    assert jars.iceberg_plan(settings).source == "cache"  # copied once, then reused
