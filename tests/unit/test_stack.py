"""The pinned stack: a line per Spark minor, its packages by coordinates, and what `make` installs for another."""

from __future__ import annotations

import pytest

from icestream.config import load_settings, project_home
from icestream.errors import ConfigError
from icestream.stack import line_constraints, lines, main, spark_line, tool


def test_the_default_line_is_the_one_constraints_txt_installs() -> None:
    pins = (project_home() / "constraints.txt").read_text().splitlines()
    (pyspark,) = [pin for pin in pins if pin.startswith("pyspark==")]
    (default,) = [line for line in lines().values() if pyspark == f"pyspark=={line.pyspark}"]
    assert default.name == "4.1"


def test_each_line_names_each_coordinate_once() -> None:
    for line in lines().values():
        coordinates = [package.coordinate for package in line.packages]
        assert len(coordinates) == len(set(coordinates))
        assert {package.artifact.split("_")[0] for package in line.packages} >= {"spark-sql-kafka-0-10"}


def test_another_lines_constraints_swap_only_the_pyspark_pin() -> None:
    original = (project_home() / "constraints.txt").read_text()
    swapped = line_constraints(original, "3.5")
    assert "pyspark==3.5.8" in swapped.splitlines()
    assert [pin for pin in swapped.splitlines() if pin.startswith("pyspark")] == ["pyspark==3.5.8"]
    unchanged = [pin for pin in original.splitlines() if not pin.startswith("pyspark==")]
    assert [pin for pin in swapped.splitlines() if not pin.startswith("pyspark==")] == unchanged


def test_an_unknown_line_is_one_clear_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"no Spark 4\.0 line \(it has 3\.5, 4\.1\)"):
        spark_line("4.0")
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("pyspark==4.1.1\n"))
    assert main(["constraints", "4.0"]) == 2
    assert capsys.readouterr().err.startswith("error: ICESTREAM_SPARK_LINE: icestream pins no Spark 4.0 line")


def test_the_spark_line_setting_takes_only_a_pinned_line() -> None:
    assert load_settings(spark_line="3.5").spark_line == "3.5"
    with pytest.raises(ConfigError, match="spark_line"):
        load_settings(spark_line="3.4")


def test_the_kafka_broker_is_a_tool_beside_the_lines_not_a_spark_package() -> None:
    kafka = tool("kafka")
    assert kafka.packages[0].artifact == "kafka_2.13"
    assert kafka.version == kafka.packages[0].version
    assert int(kafka.version.split(".")[0]) >= 4  # KRaft only: no ZooKeeper
    line_coordinates = {package.coordinate for line in lines().values() for package in line.packages}
    assert not line_coordinates & {package.coordinate for package in kafka.packages}
    with pytest.raises(ConfigError, match="pins no tool 'zookeeper'"):
        tool("zookeeper")
