"""A drain's driver JVM runs with C1 only and the serial collector, unless the user or the cluster chose a
JIT or a collector already."""

from __future__ import annotations

from pathlib import Path

import pytest

from icestream.config import load_settings
from icestream.errors import IcestreamError
from icestream.runtime import spark
from icestream.runtime.cds import JAVA_OPTION_VARIABLES
from icestream.runtime.java_options import C1_ONLY, LAUNCHER_VARIABLE, SERIAL_GC, drain_options, launcher_environ


@pytest.fixture(autouse=True)
def no_jit_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*JAVA_OPTION_VARIABLES, LAUNCHER_VARIABLE):  # the tests' own drivers run with C1 (SPARK_SUBMIT_OPTS)
        monkeypatch.delenv(name, raising=False)


def test_a_drain_gets_c1_only_and_the_serial_collector_after_the_options_it_has() -> None:
    assert drain_options("-Dlog4j2.configurationFile=x") == f"-Dlog4j2.configurationFile=x {C1_ONLY} {SERIAL_GC}"
    assert drain_options("") == f"{C1_ONLY} {SERIAL_GC}"


@pytest.mark.parametrize("theirs", ["-XX:-TieredCompilation", "-XX:TieredStopAtLevel=4", "-Xint"])
def test_a_jit_chosen_elsewhere_stands(monkeypatch: pytest.MonkeyPatch, theirs: str) -> None:
    # the cluster's spark.driver.extraJavaOptions
    assert drain_options("-Da=b", [theirs]) == f"-Da=b {SERIAL_GC}"
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", theirs)
    assert drain_options("-Da=b") == f"-Da=b {SERIAL_GC}"


@pytest.mark.parametrize("theirs", ["-XX:+UseG1GC", "-XX:+UseParallelGC", "-XX:+UseZGC"])
def test_a_collector_chosen_elsewhere_stands(monkeypatch: pytest.MonkeyPatch, theirs: str) -> None:
    assert drain_options("-Da=b", [theirs]) == f"-Da=b {C1_ONLY}"
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", theirs)
    assert drain_options("-Da=b") == f"-Da=b {C1_ONLY}"


@pytest.mark.parametrize("drain", [True, False])
def test_the_prepared_driver_options_say_c1_only_for_a_drain_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, drain: bool
) -> None:
    # A JVM this process starts: in a test worker another test's session may be running already, and a
    # running JVM's options are what they are (prepare_runtime leaves them).
    monkeypatch.setattr(spark, "existing_conf", lambda: ({}, False))
    settings = load_settings(catalog_type="hadoop", warehouse=str(tmp_path / "w"), class_data_sharing=False)
    options = spark.prepare_runtime(settings, drain=drain).conf["spark.driver.extraJavaOptions"]
    assert (C1_ONLY in options, SERIAL_GC in options) == (drain, drain), options


@pytest.mark.parametrize("available_now", [True, False])
def test_start_ingest_asks_for_a_drains_jvm_only_when_it_drains(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, available_now: bool
) -> None:
    from icestream.ingest.query import start_ingest

    asked: list[tuple[bool, bool]] = []

    def get_spark(
        settings: object, app_name: str = "icestream", drain: bool = False, creates_namespace: bool = True
    ) -> object:
        asked.append((drain, creates_namespace))
        raise IcestreamError("stop here")

    monkeypatch.setattr(spark, "get_spark", get_spark)
    settings = load_settings(warehouse=str(tmp_path / "w"), run_dir=str(tmp_path / "run"))
    with pytest.raises(IcestreamError, match="stop here"):
        start_ingest(None, settings, available_now=available_now, trigger_seconds=0 if available_now else 5)
    assert asked == [(available_now, False)], "without a change stream, the ingest refuses a missing Glue database"


def test_c1_only_keeps_the_code_cache_of_a_tiered_jvm() -> None:
    """C1 alone would shrink the code cache to 48 MB: a long-lived test session filled it and failed with
    "Out of space in CodeCache for method handle intrinsic" (2026-11-27)."""
    import subprocess

    from tests.conftest import TEST_JVM_OPTIONS

    def code_cache(options: str) -> int:
        flags = subprocess.run(["java", *options.split(), "-XX:+PrintFlagsFinal", "-version"],
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
        line = next(line for line in flags.splitlines() if " ReservedCodeCacheSize " in line)
        return int(line.split("=")[1].split()[0])

    tiered = code_cache("")
    assert code_cache(C1_ONLY) >= tiered
    assert code_cache(TEST_JVM_OPTIONS) >= tiered


def test_spark_s_launcher_jvm_gets_c1_only_and_the_serial_collector() -> None:
    assert launcher_environ() == {LAUNCHER_VARIABLE: f"-XX:TieredStopAtLevel=1 {SERIAL_GC}"}


def test_the_launcher_s_options_or_a_collector_chosen_elsewhere_stand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:+UseG1GC")  # a second collector would stop the JVM
    assert launcher_environ() == {LAUNCHER_VARIABLE: "-XX:TieredStopAtLevel=1"}
    monkeypatch.setenv(LAUNCHER_VARIABLE, "-Xmx64m")
    assert launcher_environ() == {}
