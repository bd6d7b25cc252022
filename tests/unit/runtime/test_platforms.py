"""The platform table and the warnings it drives."""

from __future__ import annotations

import pytest

from icestream.runtime.platforms import (
    AWS_CLASSES,
    PLATFORMS,
    SessionVersions,
    at_least,
    find_platform,
    iceberg_version,
    matching_platforms,
    platform_warnings,
    supported_lines,
    unsupported_spark_reason,
    version_tuple,
)


def test_versions_compare_as_numbers() -> None:
    assert version_tuple("1.10.0-amzn-0") == (1, 10, 0)
    assert at_least("1.10.0", "1.10.0")
    assert at_least("1.11.0", "1.10.0")
    assert not at_least("1.9.1", "1.10.0")
    assert at_least(None, "1.10.0")  # unknown: the newest


def test_each_release_has_one_row_per_service_and_a_source() -> None:
    keys = [(row.service, row.release) for row in PLATFORMS]
    assert len(keys) == len(set(keys))
    assert all(row.source.startswith("https://docs.aws.amazon.com/") for row in PLATFORMS)
    emr = {row.release for row in PLATFORMS if row.service == "emr-ec2"}
    assert emr == {row.release for row in PLATFORMS if row.service == "emr-serverless"}


def test_a_platform_is_supported_when_its_spark_is_a_pinned_line_and_says_why_when_not() -> None:
    assert supported_lines() == ("4.1", "3.5")
    for row in PLATFORMS:
        warnings = platform_warnings(row.spark, row.iceberg, row.python[-1])
        assert row.supported is (".".join(row.spark.split(".")[:2]) in supported_lines())
        assert any("is not one of the lines icestream pins" in line for line in warnings) is (not row.supported)
    assert find_platform("emr-serverless", "emr-8.1.0").supported
    assert find_platform("glue", "glue-5.1").supported
    assert not find_platform("emr-ec2", "emr-8.0.0").supported  # Spark 4.0: no line, nothing tested on it
    assert "ICESTREAM_SPARK_LINE" in (unsupported_spark_reason("4.0.2") or "")


def test_old_iceberg_and_old_python_are_named() -> None:
    emr = find_platform("emr-serverless", "emr-7.5.0")
    warnings = platform_warnings(emr.spark, emr.iceberg, emr.python[0])
    assert len(warnings) == 2
    assert warnings[0].startswith(f"Iceberg {emr.iceberg}: remove_orphan_files")
    assert warnings[1].startswith(f"Python {emr.python[0]}: icestream needs 3.11")
    glue = find_platform("glue", "glue-5.1")
    assert platform_warnings(glue.spark, glue.iceberg, glue.python[-1]) == []
    assert platform_warnings("3.5.8", None, "3.11.7")[0].startswith("no Iceberg runtime")


def test_a_session_matches_its_platform_rows() -> None:
    glue = find_platform("glue", "glue-5.0")
    assert glue in matching_platforms(glue.spark, glue.iceberg)
    assert matching_platforms("3.5.8", "1.10.2") == []  # this project's local pins match no platform
    with pytest.raises(KeyError, match="not in the platform table"):
        find_platform("glue", "glue-9.9")


def test_no_session_means_an_unknown_iceberg() -> None:
    assert iceberg_version(None) is None


def test_a_session_on_glue_5_0_reads_as_its_row_with_the_orphans_note() -> None:
    glue = find_platform("glue", "glue-5.0")
    found = SessionVersions(glue.spark, glue.iceberg, "3.11.9", ())
    line = found.line()
    assert line.startswith(f"Spark {glue.spark}, Iceberg {glue.iceberg}, Python 3.11.9 (driver); matches ")
    assert line.endswith("glue glue-5.0")  # EMR 7.8 has the same Spark and Iceberg, so it matches too
    assert [line.split(":")[0] for line in found.warnings()] == [f"Iceberg {glue.iceberg}"]


def test_an_emr_7_5_session_matches_both_emr_services() -> None:
    emr = find_platform("emr-ec2", "emr-7.5.0")
    line = SessionVersions(emr.spark, emr.iceberg, emr.python[0], AWS_CLASSES[2:]).line()
    assert line.endswith("matches emr-ec2 emr-7.5.0, emr-serverless emr-7.5.0")


def test_iceberg_before_1_12_on_spark_4_1_is_named_for_its_bind_parameter_bug() -> None:
    emr = find_platform("emr-ec2", "emr-8.1.0")
    (warning,) = platform_warnings(emr.spark, emr.iceberg, emr.python[-1])
    assert warning.startswith("Iceberg 1.11.0 on Spark 4.1: its SQL extensions drop bind parameters")
    assert "apache/iceberg#16625" in warning
    assert platform_warnings("4.1.1", "1.12.0", "3.11.7") == []
    assert platform_warnings("3.5.8", "1.10.1", "3.11.7") == []  # Spark 3.5 binds parameters after parsing
