"""The session's own versions, as ``icestream doctor`` reads them on a cluster or platform."""

from __future__ import annotations

import platform

from icestream.config import Settings
from icestream.runtime.platforms import AWS_CLASSES, iceberg_version, session_versions


def test_the_sessions_iceberg_and_classes_are_read_through_py4j(spark, settings: Settings) -> None:
    assert iceberg_version(spark) == settings.iceberg_version  # the jar the session loaded
    found = session_versions(spark)
    assert (found.spark, found.python) == (spark.version, platform.python_version())
    # The Iceberg runtime jar carries GlueCatalog and S3FileIO; the AWS SDK is not on this machine.
    assert found.missing_classes == AWS_CLASSES[2:]
