"""Fitting a session into a cluster: spark-defaults.conf, which master wins, how settings merge."""

from __future__ import annotations

from pathlib import Path

import pytest

from icestream.config import load_settings
from icestream.runtime import cluster


def test_spark_defaults_file_is_read_in_its_forms(tmp_path: Path) -> None:
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text(
        "# EMR writes these\nspark.master yarn\nspark.driver.extraJavaOptions   -XX:+UseG1GC -Dx=1\n"
        "spark.sql.extensions=com.example.Ext\n! old comment\nspark.executor.memory = 4g\n\n"
    )
    assert cluster.read_defaults(defaults) == {
        "spark.master": "yarn",
        "spark.driver.extraJavaOptions": "-XX:+UseG1GC -Dx=1",
        "spark.sql.extensions": "com.example.Ext",
        "spark.executor.memory": "4g",
    }
    assert cluster.read_defaults(tmp_path / "missing.conf") == {}


def test_platform_defaults_come_from_spark_conf_dir_and_master(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "spark-defaults.conf").write_text("spark.executor.cores 4\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("MASTER", "spark://head:7077")
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    from pyspark import SparkContext

    # A session shared by earlier tests in this process would otherwise be the running driver.
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    assert cluster.existing_conf() == ({"spark.executor.cores": "4", "spark.master": "spark://head:7077"}, False)


def test_lists_are_joined_and_the_clusters_other_settings_kept() -> None:
    ours = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=x -Dshared=1",
        "spark.jars": "/iceberg.jar",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
    }
    theirs = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.driver.extraJavaOptions": "-XX:+UseG1GC -Dshared=1",
        "spark.jars": "/platform.jar",
        "spark.sql.shuffle.partitions": "200",
        "spark.master": "yarn",
    }
    assert cluster.merged(ours, theirs) == {
        "spark.sql.extensions": (
            "io.delta.sql.DeltaSparkSessionExtension,org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
        ),
        "spark.driver.extraJavaOptions": "-XX:+UseG1GC -Dshared=1 -Dlog4j2.configurationFile=x",
        "spark.jars": "/platform.jar,/iceberg.jar",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
    }
    assert cluster.merged(ours, {}) == ours


def test_the_running_drivers_master_wins_even_over_an_explicit_setting() -> None:
    explicit = load_settings(spark_master="local[2]")
    settings = cluster.with_master(explicit, {"spark.master": "yarn"}, running=True)
    assert settings.spark_master == "yarn"
    assert settings.sources["spark_master"] == "running driver"


def test_the_platforms_default_master_replaces_only_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICESTREAM_SPARK_MASTER", raising=False)
    platform = {"spark.master": "yarn"}
    assert cluster.with_master(load_settings(), platform, running=False).spark_master == "yarn"
    assert (
        cluster.with_master(load_settings(profile="aws", warehouse="s3://b/w"), platform, False).spark_master == "yarn"
    )
    explicit = load_settings(spark_master="spark://head:7077")
    assert cluster.with_master(explicit, platform, running=False) is explicit
    assert cluster.with_master(load_settings(), {}, running=False).spark_master == "local[*]"
