"""Shared fixtures: one isolated environment, one emulator and one SparkSession per test session.

The test session never touches the user's ``data/`` folder: the warehouse, run folder (emulator
state) and output go to a temporary folder, exported as ``ICESTREAM_*`` variables so that
notebooks executed by papermill in tests see the same settings. The jar cache is shared with the
project (``.cache/jars``), so the jars are built once per machine, not once per test run.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from icestream.config import Settings, load_settings, project_home
from icestream.runtime.java_options import C1_ONLY

# A test's kind is the folder it lives in; the marker follows from it, so `-m unit` can never
# start a JVM or the emulator because someone marked an integration test `unit` by mistake.
FOLDER_KINDS = {
    "unit": "unit",
    "integration": "integration",
    "notebooks": "notebook",
    "reliability": "reliability",
    "cluster": "cluster",
    "browser": "browser",
}
LONGEST_FIRST = ("notebook", "cluster", "browser", "reliability", "integration", "unit")
# Fixtures that start the JVM, the emulator or a cluster: a unit test must not ask for them.
SERVICE_FIXTURES = frozenset(
    ("spark", "emulator", "stream_settings", "fresh", "spark_cluster", "kafka_broker", "kafka_fresh")
)
TESTS = Path(__file__).resolve().parent
# Java options of the drivers the tests start (see test_home); ICESTREAM_TEST_JVM_OPTIONS= (empty) measures without.
TEST_JVM_OPTIONS = os.environ.get("ICESTREAM_TEST_JVM_OPTIONS", C1_ONLY)

# TEST_CPU_LEDGER=<file> writes each test's CPU to it (docs/testing.md: where the suite's CPU goes).
pytest_plugins = ["tests.helpers.cpu_ledger"] if os.environ.get("TEST_CPU_LEDGER") else []

# No per-example deadline: on a shared 2-core machine it turns a correctness test into a timing test.
hypothesis_settings.register_profile("icestream", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("icestream")


def kind_of(path: Path) -> str | None:
    """The kind of test a file holds, from its folder under ``tests/`` (None outside them)."""
    try:
        folder = path.resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return None
    return FOLDER_KINDS.get(folder)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its folder's kind; refuse a test marked or equipped as another kind.

    The longest kinds come first (a stable sort, so files keep their order within a kind): with
    ``make test``'s workers (pytest-xdist, a file at a time) the long files start at once instead of
    ending the run alone.
    """
    items.sort(key=lambda item: LONGEST_FIRST.index(kind_of(Path(str(item.path))) or "unit"))
    problems = []
    for item in items:
        kind = kind_of(Path(str(item.path)))
        if kind is None:
            continue
        item.add_marker(kind)
        others = {mark.name for mark in item.iter_markers()} & (set(FOLDER_KINDS.values()) - {kind})
        if others:
            problems.append(f"{item.nodeid} is in the {kind} folder but marked {', '.join(sorted(others))}")
        services = SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if kind == "unit" and services:
            problems.append(f"{item.nodeid} is a unit test but uses {', '.join(sorted(services))}")
    if problems:
        raise pytest.UsageError(
            "tests whose kind does not match their folder (move or unmark them):\n  " + "\n  ".join(problems)
        )


@pytest.fixture(scope="session")
def test_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A temporary folder for warehouse, run state and outputs, exported to the environment."""
    home = tmp_path_factory.mktemp("icestream")
    exported = {
        "ICESTREAM_WAREHOUSE": str(home / "warehouse"),
        "ICESTREAM_RUN_DIR": str(home / "run"),
        "ICESTREAM_OUTPUT_DIR": str(home / "output"),
        # The session's emulator runs without the per-shard write limits (see `emulator`): the setting says so,
        # so notebook 01 checks its hot shard against the limits only where they are enforced.
        "ICESTREAM_EMULATOR_WRITE_LIMITS": "false",
        # Setup's Kinesis calls wait as long as botocore's own retries had (3 x 30 s) for the loaded machine's
        # emulator: the 10 s default is for a user's silent endpoint; a test must not depend on machine load.
        "ICESTREAM_KINESIS_TIMEOUT": "45",
        # Each session's emulator on a free port, found by its state file: sessions side by side (pytest-xdist's
        # workers, other checkouts) never find one another's, nor a user's on the emulator_port.
        "ICESTREAM_EMULATOR_PORT": "0",
        "ICESTREAM_JAR_CACHE_DIR": str(project_home() / ".cache" / "jars"),
        # Spark's scratch folders (block manager, shuffle, unpacked archives, userFiles) of every
        # driver and worker the tests start: a driver the crash tests SIGKILL leaves its own behind,
        # hundreds of MB with the packed environment unpacked, and under /tmp nothing removes them.
        "SPARK_LOCAL_DIRS": str(home / "spark-local"),
    }
    # Every driver JVM the tests start (this session's, notebook kernels', subprocess drivers',
    # spark-submit's) compiles with C1 only: they are many, short and handle little data, and C2's
    # compile threads were 40 % of the crash campaigns' CPU (docs/testing.md). Spark's launcher adds
    # SPARK_SUBMIT_OPTS to the driver's java command; benchmarks and the workbook keep the JVM's default.
    exported["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {TEST_JVM_OPTIONS}".strip()
    saved = {key: os.environ.get(key) for key in [*exported, "ICESTREAM_PROFILE", "ICESTREAM_KINESIS_ENDPOINT"]}
    os.environ.update(exported)
    os.environ.pop("ICESTREAM_PROFILE", None)
    os.environ.pop("ICESTREAM_KINESIS_ENDPOINT", None)
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def settings(test_home: Path) -> Settings:
    """Settings of the test environment (local profile, temporary warehouse)."""
    return load_settings()


@pytest.fixture(scope="session")
def emulator(settings: Settings) -> Iterator[str]:
    """One moto Kinesis server for the whole test session; yields its endpoint."""
    from icestream.kinesis.emulator import Emulator
    from icestream.producer.background import stop_background_producer

    server = Emulator(settings.path("run_dir"))
    # Without the per-shard write limits (on by default for users): campaigns send tens of thousands of
    # records at once, and the limits' own tests (tests/integration/test_write_limits.py) start their own.
    endpoint = server.start(write_limits=settings.emulator_write_limits)  # false: test_home sets it
    yield endpoint
    stop_background_producer(settings)  # notebook 01 starts one; it must not outlive the tests
    server.stop()


@pytest.fixture(scope="session")
def kafka_broker(settings: Settings) -> Iterator[str]:
    """One local Kafka broker (a KRaft node on loopback) for the whole test session; yields its bootstrap."""
    from icestream.kafka.broker import Broker

    broker = Broker.from_settings(settings)
    started = broker.start()
    yield started.bootstrap
    broker.stop()


@pytest.fixture
def kafka_fresh(spark, kafka_broker: str) -> Callable[..., Settings]:
    """Make a test-private topic and tables: ``kafka_fresh(partitions=2, prefix="kafka", tables=True, **settings)``.

    The topic is ``<prefix>-<random>`` and the tables ``<prefix>_<random>`` (plus ``_rejects``), like
    :func:`fresh` makes a stream; other keyword arguments override settings.
    """
    from icestream.kafka.connection import kafka_connection
    from icestream.kafka.topics import ensure_topic
    from icestream.lake.table import setup_tables

    def make(partitions: int = 2, prefix: str = "kafka", tables: bool = True, **overrides: object) -> Settings:
        suffix = uuid.uuid4().hex[:8]
        made = load_settings(kafka_topic=f"{prefix}-{suffix}", table=f"{prefix}_{suffix}", **overrides)
        ensure_topic(kafka_connection(made), partitions)
        if tables:  # a change stream's keyed table is made by its ingest instead
            setup_tables(spark, made)
        return made

    return make


@pytest.fixture(scope="session")
def spark(settings: Settings):
    """The one SparkSession of the test session."""
    from icestream.runtime.spark import get_spark

    session = get_spark(settings, app_name="icestream-tests")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _the_shared_session_stays_active(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the shared session, make it the active one again.

    A second session (``spark.newSession()``, to act as another writer) becomes the thread's active
    session as soon as it runs ``createDataFrame``, and ``get_spark`` returns the active session: the
    CLI's commands called in-process by a later test then wrote through that session's catalog,
    whose cached tables the shared session never sees (test_live, then test_load read an empty table).
    """
    yield
    if "spark" not in request.fixturenames:
        return
    from pyspark.sql import SparkSession

    shared = request.getfixturevalue("spark")
    if SparkSession.getActiveSession() is not shared:
        SparkSession._activeSession = shared  # pyspark 3.5 has no public setter; its builder does this
        shared._jvm.SparkSession.setActiveSession(shared._jsparkSession)


@pytest.fixture
def kept_blocks(spark) -> Callable[[], set[int]]:
    """Ids of the RDDs with blocks in Spark's block store now (what a batch or a load keeps)."""

    def now() -> set[int]:
        infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
        return {info.id() for info in infos if info.numCachedPartitions()}

    return now


@pytest.fixture
def stream_settings(settings: Settings, emulator: str) -> Settings:
    """Settings naming a fresh stream (so tests sharing the emulator never see each other's records)."""
    return load_settings(stream_name=f"test-{uuid.uuid4().hex[:10]}")


@pytest.fixture
def fresh(spark, emulator: str) -> Callable[..., Settings]:
    """Make a test-private stream and tables, so each test (or campaign) sees only its own records.

    ``fresh(shards=2, prefix="test", **settings)`` names the stream ``<prefix>-<random>`` and the
    tables ``<prefix>_<random>`` (plus ``_rejects``); other keyword arguments override settings.
    """
    from icestream.kinesis.clients import ensure_stream
    from icestream.lake.table import setup_tables

    def make(shards: int = 2, prefix: str = "test", **overrides: object) -> Settings:
        suffix = uuid.uuid4().hex[:8]
        made = load_settings(stream_name=f"{prefix}-{suffix}", table=f"{prefix}_{suffix}", **overrides)
        ensure_stream(made, shard_count=shards)
        setup_tables(spark, made)
        return made

    return make


@contextlib.contextmanager
def generated_table(spark, prefix: str, config, chunk_rows: int = 50_000) -> Iterator[tuple[Settings, str, list, dict]]:
    """A private events table bulk-loaded (no Kinesis) with the records ``config`` generates; dropped after.

    Yields:
        ``(settings naming the table, its qualified name, the generated records, load counts)``.
    """
    from icestream.file_load.bulk import load_payloads
    from icestream.lake.table import setup_tables
    from icestream.synthetic.generator import generate

    local = load_settings(table=f"{prefix}_{uuid.uuid4().hex[:10]}")
    name = setup_tables(spark, local)[0].name
    records, _ = generate(config)
    counts = load_payloads(spark, name, ((r.data, r.partition_key) for r in records), chunk_rows=chunk_rows)
    try:
        yield local, name, records, counts
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
