"""``icestream doctor``'s version checks, without a session."""

from __future__ import annotations

import importlib.metadata

import pytest

from icestream.cli import local
from icestream.config import load_settings
from icestream.errors import IcestreamError
from icestream.runtime.platforms import SPARK_4_REASON, find_platform


def test_doctor_refuses_spark_4_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    emr_8 = find_platform("emr-serverless", "emr-8.0.0")
    monkeypatch.setattr(importlib.metadata, "version", lambda name: emr_8.spark)
    checks = dict(local._doctor_checks(load_settings(), start_spark=False))
    with pytest.raises(IcestreamError) as refused:
        checks["spark"]()
    assert str(refused.value) == f"pyspark {emr_8.spark}: {SPARK_4_REASON}"


def test_doctor_reads_pyspark_from_the_path_where_pip_did_not_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark

    def not_from_pip(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_from_pip)  # EMR and Glue: pyspark on PYTHONPATH
    checks = dict(local._doctor_checks(load_settings(), start_spark=False))
    assert checks["spark"]() == f"pyspark {pyspark.__version__}"
